"""infra/kubeflow: what a Kubeflow Pipelines cluster needs from us, held to configs/kubeflow.yaml
and to least privilege (parsed with python-hcl2, as tests/test_infra.py reads infra/terraform;
its `terraform fmt` test covers infra/kubeflow too)."""

from __future__ import annotations

import pytest
import yaml

from tests.infra_support import KUBEFLOW_INFRA, interpolate, load_terraform
from tests.kubeflow_support import kubeflow_config


@pytest.fixture(scope="module")
def tf():
    return load_terraform(KUBEFLOW_INFRA)


def _defaults(tf) -> dict[str, str]:
    return {name: body.get("default") for name, body in tf["variable"].items()}


def test_the_pods_account_may_only_use_the_bucket(tf):
    resources = tf["resource"]
    assert set(resources) == {"google_service_account", "google_storage_bucket_iam_member",
                              "google_service_account_iam_member"}, "no project-level grants"
    roles = {(b["bucket"], b["role"]) for b in resources["google_storage_bucket_iam_member"].values()}
    assert roles == {("${var.bucket}", "roles/storage.objectUser"),
                     ("${var.bucket}", "roles/storage.legacyBucketReader")}
    members = {b["member"] for b in resources["google_storage_bucket_iam_member"].values()}
    assert members == {"serviceAccount:${google_service_account.kfp_pipeline.email}"}


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
