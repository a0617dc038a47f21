"""infra/kubeflow: what a Kubeflow Pipelines cluster needs from us, held to configs/kubeflow.yaml
and to least privilege (parsed with python-hcl2, as tests/test_infra.py reads infra/terraform;
its `terraform fmt` test covers infra/kubeflow too)."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.infra_support import KUBEFLOW_INFRA, interpolate, load_terraform
from tests.kubeflow_support import kubeflow_config


@pytest.fixture(scope="module")
def tf():
    return load_terraform(KUBEFLOW_INFRA)


def _defaults(tf) -> dict[str, str]:
    return {name: body.get("default") for name, body in tf["variable"].items()}


def _enabled(tf, resource: dict, options: dict) -> bool:
    """Whether a resource exists with the module's variables at their defaults, overridden by `options`."""
    count = resource.get("count")
    if count is None:
        return True
    variables = {**_defaults(tf), **options}
    condition = re.fullmatch(r'\$\{var\.(\w+) == "" \? 0 : 1\}|\$\{var\.(\w+) \? 1 : 0\}', count)
    assert condition, f"count {count}: not a form this test reads"
    if condition[1]:
        return variables[condition[1]] != ""
    return bool(variables[condition[2]])


def _granted(tf, options: dict) -> set[tuple[str, str, str]]:
    """(role, what it is granted on, member) of every grant the module makes with `options`."""
    out = set()
    for rtype, named in tf["resource"].items():
        if rtype.endswith("_iam_member"):
            for body in named.values():
                if _enabled(tf, body, options):
                    target = next(body[k] for k in ("bucket", "topic", "project", "service_account_id") if k in body)
                    out.add((body["role"], target, body["member"]))
    return out


POD_ACCOUNT = "serviceAccount:${google_service_account.kfp_pipeline.email}"
OPTIONS = {"pubsub_topic": "projects/my-gcp-project/topics/penguin-pipeline-runs", "vertex_endpoint": True,
           "canary_check_metrics": True}


def test_the_pods_account_may_only_use_the_bucket_unless_an_option_needs_more(tf):
    bucket_roles = {("roles/storage.objectUser", "${var.bucket}", POD_ACCOUNT),
                    ("roles/storage.legacyBucketReader", "${var.bucket}", POD_ACCOUNT)}
    workload_identity = {(r, t, m) for r, t, m in _granted(tf, {}) if r == "roles/iam.workloadIdentityUser"}
    assert _granted(tf, {}) - workload_identity == bucket_roles, "no project-level grant with every option off"
    assert _granted(tf, OPTIONS) - workload_identity == bucket_roles | {
        ("roles/pubsub.publisher", "${var.pubsub_topic}", POD_ACCOUNT),  # that topic only
        ("roles/aiplatform.user", "${var.project_id}", POD_ACCOUNT),
        ("${google_project_iam_custom_role.metrics_reader[0].id}", "${var.project_id}", POD_ACCOUNT)}
    [role] = tf["resource"]["google_project_iam_custom_role"].values()
    assert role["permissions"] == ["monitoring.timeSeries.list"]
    assert role["count"] == "${var.canary_check_metrics ? 1 : 0}"


def test_each_option_the_config_turns_on_is_granted_what_preflight_checks_it_needs():
    """Preflight asks Policy Troubleshooter for these permissions (pipeline/cloud/access.py option_needs); the
    module's variable for each option grants a role holding it (roles/pubsub.publisher: pubsub.topics.publish;
    roles/aiplatform.user: aiplatform.models.upload and aiplatform.endpoints.deploy, cloud.google.com/iam/docs/
    roles-permissions/aiplatform; the custom role: monitoring.timeSeries.list)."""
    from pipeline.cloud.access import option_needs

    config = kubeflow_config("notify.pubsub_topic=projects/my-gcp-project/topics/penguin-pipeline-runs",
                             "serving.target=vertex_endpoint", "serving.check.before_run=true",
                             "serving.vertex_endpoint.endpoint=projects/my-gcp-project/locations/us-central1/"
                             "endpoints/42", "serving.vertex_endpoint.model_id=penguin",
                             "serving.vertex_endpoint.accept_older_image_tf=true")
    needs = {(n.permission, n.grant) for n in option_needs(config, "kubeflow.google_service_account", "a")}
    assert needs == {("pubsub.topics.publish", "roles/pubsub.publisher on the topic"),
                     ("aiplatform.models.upload", "roles/aiplatform.user"),
                     ("aiplatform.endpoints.deploy", "roles/aiplatform.user"),
                     ("monitoring.timeSeries.list", "a role with monitoring.timeSeries.list (the Terraform's metrics "
                                                    "reader)")}
    assert option_needs(kubeflow_config(), "kubeflow.google_service_account", "a") == []


def test_the_pod_default_projects_the_token_where_the_run_reads_it_into_the_pods_the_compile_labels():
    """The access-ml-pipeline PodDefault (multi-user Kubeflow) selects the label every step's pod carries
    (pipeline/kubeflow/compile.py POD_LABELS) and mounts a token for the pipelines API's audience at
    kubeflow.in_cluster_token_file."""
    import posixpath

    from pipeline.kubeflow.compile import POD_LABELS

    manifest = yaml.safe_load((KUBEFLOW_INFRA / "poddefault.yaml").read_text())
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1alpha1", "PodDefault")
    spec = manifest["spec"]
    assert spec["selector"] == {"matchLabels": POD_LABELS}
    directory, name = posixpath.split(kubeflow_config().kubeflow.in_cluster_token_file)
    [mount] = spec["volumeMounts"]
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    [source] = volume["projected"]["sources"]
    assert mount["mountPath"] == directory and source["serviceAccountToken"]["path"] == name
    assert source["serviceAccountToken"]["audience"] == "pipelines.kubeflow.org"  # the API server's TokenReview


def test_workload_identity_binds_the_configured_namespace_and_account(tf):
    [binding] = tf["resource"]["google_service_account_iam_member"].values()
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    kf = kubeflow_config().kubeflow
    member = interpolate(tf, binding["member"], {**_defaults(tf), "project_id": "my-gcp-project"})
    assert member == f"serviceAccount:my-gcp-project.svc.id.goog[{kf.namespace}/{kf.service_account}]"


def test_the_manifest_is_the_configured_account_annotated_with_the_google_one(tf):
    kf = kubeflow_config().kubeflow
    manifest = yaml.safe_load((KUBEFLOW_INFRA / "serviceaccount.yaml").read_text())
    assert manifest["kind"] == "ServiceAccount"
    assert (manifest["metadata"]["namespace"], manifest["metadata"]["name"]) == (kf.namespace, kf.service_account)
    account_id = interpolate(tf, tf["resource"]["google_service_account"]["kfp_pipeline"]["account_id"], _defaults(tf))
    assert manifest["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == \
        f"{account_id}@my-gcp-project.iam.gserviceaccount.com"



def test_the_limit_range_bounds_every_container_of_the_configured_namespace():
    """Ephemeral storage, which the pipeline spec cannot set per task (docs/kubeflow.md, "Pod resources")."""
    kf = kubeflow_config().kubeflow
    manifest = yaml.safe_load((KUBEFLOW_INFRA / "limitrange.yaml").read_text())
    assert (manifest["kind"], manifest["metadata"]["namespace"]) == ("LimitRange", kf.namespace)
    [limit] = manifest["spec"]["limits"]
    assert limit["type"] == "Container" and {"defaultRequest", "default"} <= set(limit)
    assert all("ephemeral-storage" in limit[k] for k in ("defaultRequest", "default"))
