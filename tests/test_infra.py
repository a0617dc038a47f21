"""infra/terraform (parsed with python-hcl2, scanned by checkov) and the TF
Serving manifests, checked for what production relies on. The images are in
test_images.py, Cloud Build in test_cloudbuild.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.config import load_config
from tests.infra_support import (
    APIS,
    DEPLOYER,
    INFRA,
    TERRAFORM,
    grants,
    load_terraform,
    may_write,
    sa,
)

# Roles that grant far more than any of our jobs needs.
BROAD_ROLES = {"roles/owner", "roles/editor", "roles/viewer", "roles/storage.admin", "roles/aiplatform.admin",
               "roles/iam.serviceAccountAdmin", "roles/iam.serviceAccountTokenCreator", "roles/dataflow.admin",
               "roles/dataflow.developer", "roles/storage.objectAdmin"}
REPOSITORY = "${google_artifact_registry_repository.images.name}"


@pytest.fixture(scope="module")
def tf() -> dict:
    return load_terraform()


def roles_of(tf, member: str, target: str | None = None) -> set[str]:
    return {g.role for g in grants(tf) if g.member == member and (target is None or g.target == target)}


def test_buckets_have_uniform_access_versioning_and_no_public_access(tf):
    buckets = tf["resource"]["google_storage_bucket"]
    assert {"pipeline", "access_logs"} <= set(buckets)
    for name, bucket in buckets.items():
        assert bucket["uniform_bucket_level_access"] is True, name
        assert bucket["versioning"][0]["enabled"] is True, name
        assert bucket["public_access_prevention"] == "enforced", name
        assert bucket.get("force_destroy") is False, name
    assert buckets["pipeline"]["logging"][0]["log_bucket"] == "${google_storage_bucket.access_logs.name}"


def test_one_service_account_per_job(tf):
    accounts = tf["resource"]["google_service_account"]
    jobs = {"pipeline", "training", "dataflow", "serving", "build"}
    assert set(accounts) == jobs
    assert {a["account_id"] for a in accounts.values()} == {f"${{var.name}}-{job}" for job in jobs}


def test_least_privilege_roles(tf):
    all_grants = grants(tf)
    assert all_grants, "no IAM grants found"
    for g in all_grants:
        assert g.role not in BROAD_ROLES, f"{g.address} grants {g.role}"
    # Storage access is granted on a bucket, never project-wide.
    project_roles = {g.role for g in all_grants if g.address.startswith("google_project_iam_member")}
    assert not any(role.startswith("roles/storage.") for role in project_roles), project_roles
    assert roles_of(tf, sa("serving")) == {"roles/logging.logWriter", "roles/storage.objectViewer",
                                           "roles/artifactregistry.reader"}
    training = roles_of(tf, sa("training"))
    assert "roles/aiplatform.user" not in training and "roles/iam.serviceAccountUser" not in training


def test_dataflow_launcher_role_is_narrow(tf):
    role = tf["resource"]["google_project_iam_custom_role"]["dataflow_launcher"]
    assert role["permissions"] and all(p.startswith("dataflow.jobs.") or p in ("dataflow.messages.list",
                                                                                 "dataflow.metrics.get")
                                       for p in role["permissions"])


def test_the_canary_check_reads_time_series_and_nothing_else(tf):
    # The run's CanaryCheck on a Vertex endpoint calls ListTimeSeries as the pipeline account.
    role = tf["resource"]["google_project_iam_custom_role"]["metrics_reader"]
    assert role["permissions"] == ["monitoring.timeSeries.list"]
    assert "${google_project_iam_custom_role.metrics_reader.id}" in roles_of(tf, sa("pipeline"))


def test_pipeline_may_act_only_as_the_training_and_dataflow_accounts(tf):
    acts_as = {g.target for g in grants(tf)
               if g.role == "roles/iam.serviceAccountUser" and g.member == sa("pipeline")}
    assert acts_as == {"${google_service_account.training.name}", "${google_service_account.dataflow.name}"}


@pytest.mark.parametrize("overrides", [[], ["dataflow.enabled=false"], ["vertex.worker_pool.preset=tpu_v3"]])
def test_terraform_enables_every_api_the_run_and_preflight_call(tf, overrides):
    # The code's own lists: what the configured run calls (preflight's APIs check asks for these), and every
    # API preflight may call (google_apis refuses others; test_preflight.py checks a full run calls exactly
    # these). Adding a call to a new API without enabling it here fails.
    from pipeline.cloud import google_apis
    from pipeline.vertex.preflight import required_apis

    config = load_config("configs/vertex.yaml", overrides)
    wanted = set(required_apis(config)) | {google_apis.service(api) for api in google_apis.APIS}
    assert wanted - set(tf["locals"]["apis"]) == set()


def test_deployers_may_read_what_preflight_reads(tf):
    # Service Usage's services.batchGet and consumerQuotaMetrics.get (serviceusage.services.get, .quotas.get).
    assert "roles/serviceusage.serviceUsageViewer" in roles_of(tf, DEPLOYER, "${var.project_id}")


def test_required_apis_and_variables(tf):
    apis = set(tf["locals"]["apis"])
    assert {"aiplatform.googleapis.com", "dataflow.googleapis.com", "artifactregistry.googleapis.com",
            "storage.googleapis.com", "iam.googleapis.com", "compute.googleapis.com",
            "cloudbuild.googleapis.com"} <= apis
    assert {"project_id", "region"} <= set(tf["variable"])
    assert all(v.get("description") for v in tf["variable"].values())
    repo = tf["resource"]["google_artifact_registry_repository"]["images"]
    assert repo["format"] == "DOCKER" and repo["docker_config"][0]["immutable_tags"] is True


def test_dataflow_subnetwork_has_private_google_access_and_worker_firewall(tf):
    """Workers without public IPs reach GCS and Artifact Registry only through
    Private Google Access, and talk to each other on TCP 12345-12346."""
    res = tf["resource"]
    network = res["google_compute_network"]["dataflow"]
    assert network["auto_create_subnetworks"] is False
    subnet = res["google_compute_subnetwork"]["dataflow"]
    assert subnet["private_ip_google_access"] is True
    assert subnet["network"] == "${google_compute_network.dataflow.id}" and subnet["region"] == "${var.region}"
    assert subnet["log_config"], "flow logs"
    rules = [r for r in res["google_compute_firewall"].values()
             if r["network"] in ("${google_compute_network.dataflow.name}", "${google_compute_network.dataflow.id}")]
    worker_rules = [r for r in rules if r.get("direction", "INGRESS") == "INGRESS"
                    and r.get("source_tags") == ["dataflow"] and r.get("target_tags") == ["dataflow"]]
    assert worker_rules, "no ingress rule between workers tagged `dataflow`"
    allowed = {(a["protocol"], port) for r in worker_rules for a in r["allow"] for port in a.get("ports", [])}
    assert ("tcp", "12345-12346") in allowed, allowed
    # Nothing opens the network to the internet.
    assert not any("0.0.0.0/0" in r.get("source_ranges", []) for r in rules)
    assert tf["output"]["dataflow_subnetwork"]["value"] == "${google_compute_subnetwork.dataflow.self_link}"


def test_dataflow_workers_run_as_their_own_account(tf):
    assert roles_of(tf, sa("dataflow"), "${var.project_id}") == {"roles/dataflow.worker", "roles/logging.logWriter"}
    assert "roles/dataflow.worker" not in roles_of(tf, sa("pipeline"))
    # It pulls the pipeline image as sdk_container_image and reads the bucket.
    assert "roles/artifactregistry.reader" in roles_of(tf, sa("dataflow"), REPOSITORY)
    assert {"roles/storage.objectViewer", "roles/storage.legacyBucketReader"} <= roles_of(
        tf, sa("dataflow"), "${google_storage_bucket.pipeline.name}")
    assert tf["output"]["dataflow_service_account"]["value"] == "${google_service_account.dataflow.email}"


# Object names as the pipeline writes them (gs://<bucket>/<name>); test_cloudbuild.py
# checks the same against a compiled spec.
MODEL = "pipeline_root/penguin-tpu/Trainer/model/7/Format-Serving/saved_model.pb"
SERVING = "serving_model/penguin-tpu/1700000000/saved_model.pb"
DATAFLOW_TEMP = "tmp/dataflow/temp/beam-temp-1/part-0"
SPEC = "specs/pipeline-0123abc.json"
DATA = "data/penguins/penguins.csv"
# Transform's analyzer cache: with Dataflow, Beam's workers write its entries (components/transform.py).
ANALYZER_CACHE = (load_config("configs/vertex.yaml", ["data.spans=window(2)", "data.analyzer_cache=true"])
                  .pipeline.analyzer_cache_root.split("/", 3)[3] + "/20261130T000000.000000Z-0123abcd/key/0-of-1.gz")


@pytest.mark.parametrize("account, writable, not_writable", [
    ("training", [MODEL], [SERVING, DATAFLOW_TEMP, SPEC, DATA]),
    ("dataflow", [MODEL, DATAFLOW_TEMP, ANALYZER_CACHE], [SERVING, SPEC, DATA]),
    ("build", [SPEC], [MODEL, SERVING, DATA, ANALYZER_CACHE]),
    ("serving", [], [MODEL, SERVING, DATA, ANALYZER_CACHE]),
    ("pipeline", [MODEL, SERVING, DATAFLOW_TEMP, ANALYZER_CACHE], []),
])
def test_bucket_writes_stay_under_each_jobs_prefixes(tf, account, writable, not_writable):
    """Only the pipeline (its Pusher) may write serving_model/; the others write where their job does."""
    for name in writable:
        assert may_write(tf, sa(account), name), f"{account} cannot write {name}"
    for name in not_writable:
        assert not may_write(tf, sa(account), name), f"{account} may write {name}"


def test_cloud_build_account_can_push_images_and_upload_specs(tf):
    assert roles_of(tf, sa("build"), REPOSITORY) == {"roles/artifactregistry.writer"}
    assert "roles/logging.logWriter" in roles_of(tf, sa("build"), "${var.project_id}")
    assert may_write(tf, sa("build"), SPEC)
    # Its sources come from where deployers may stage them (gcloud builds submit --gcs-source-staging-dir).
    assert may_write(tf, DEPLOYER, "source/1700000000.123-abc.tgz")
    assert not may_write(tf, DEPLOYER, SERVING)
    assert tf["output"]["build_service_account"]["value"] == "${google_service_account.build.email}"


def test_storage_analytics_group_may_write_access_logs(tf):
    writers = {g.member for g in grants(tf) if g.target == "${google_storage_bucket.access_logs.name}"
               and g.role == "roles/storage.objectCreator" and g.condition is None}
    assert "group:cloud-storage-analytics@google.com" in writers


def test_accounts_and_bindings_wait_for_api_enablement(tf):
    """A first `apply` in an empty project would race the API enablement otherwise."""
    waiting = ("google_service_account", "google_project_iam_custom_role", "google_storage_bucket",
               "google_artifact_registry_repository", "google_compute_network", "google_compute_subnetwork",
               "google_compute_firewall")
    checked = 0
    for rtype, named in tf["resource"].items():
        if rtype in waiting or rtype.endswith("_iam_member"):
            for name, body in named.items():
                assert APIS in body.get("depends_on", []), f"{rtype}.{name} does not depend on the API enablement"
                checked += 1
    assert checked > 20


def test_for_each_keys_are_known_before_the_first_apply(tf):
    """Terraform refuses to plan a for_each whose keys come from attributes of
    resources not yet created (a service account's email, say): map literals and
    locals with fixed keys, or sets of input variables, only."""
    for rtype, named in tf["resource"].items():
        for name, body in named.items():
            for_each = body.get("for_each")
            if for_each is None or isinstance(for_each, dict):
                continue
            local = re.fullmatch(r"\$\{local\.(\w+)\}", for_each)
            if local:
                assert isinstance(tf["locals"][local[1]], dict), f"{rtype}.{name}"
                continue
            literals = re.fullmatch(r"\$\{toset\(local\.(\w+)\)\}", for_each)
            if literals:
                assert not any("${" in v for v in tf["locals"][literals[1]]), f"{rtype}.{name}"
                continue
            assert re.fullmatch(r"\$\{toset\(var\.\w+\)\}", for_each), f"{rtype}.{name}: for_each = {for_each}"


def test_terraform_parses_and_is_formatted():
    """terraform's own parser; `validate` would need the provider download, which needs the network."""
    if shutil.which("terraform") is None:
        pytest.skip("terraform is not installed")
    result = subprocess.run(["terraform", "fmt", "-check", "-diff", "-recursive", str(INFRA)],  # kubeflow/ too
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_checkov_suppressions_give_reasons():
    dockerfiles = [p for p in (INFRA / "docker").glob("Dockerfile*") if p.suffix != ".dockerignore"]
    sources = [*TERRAFORM.glob("*.tf"), *dockerfiles]
    skips = re.findall(r"#\s*checkov:skip=([A-Z0-9_]+)(:?)(.*)", "".join(p.read_text() for p in sources))
    skips += re.findall(r"checkov\.io/skip\d+: ([A-Z0-9_]+)(=?)(.*)", (INFRA / "serving" / "k8s.yaml").read_text())
    assert len(skips) >= 9, f"expected at least the 9 documented suppressions, found {skips}"
    for check, separator, reason in skips:
        assert separator and len(reason.strip()) > 20, f"{check} is suppressed without a reason"


def test_checkov_finds_no_failed_checks():
    """Terraform, Dockerfiles and the Kubernetes manifest; suppressions must carry a reason."""
    checkov = Path(__file__).resolve().parent.parent / ".venv-tools/bin/checkov"
    if not checkov.exists():
        pytest.skip("checkov lives in the tools venv: run `make tools-venv` (pinned in requirements-tools.lock)")
    result = subprocess.run([str(checkov), "-d", str(INFRA), "-o", "json", "--skip-download"],
                            capture_output=True, text=True, timeout=600)
    reports = {r["check_type"]: r for r in json.loads(result.stdout)}
    assert {"terraform", "dockerfile", "kubernetes"} <= set(reports)
    for kind, report in reports.items():
        failed = [f"{c['check_id']} {c['resource']}" for c in report["results"]["failed_checks"]]
        assert failed == [], f"{kind}: {failed}"
        assert report["summary"]["passed"] > 30, kind
        for skipped in report["results"]["skipped_checks"]:
            reason = skipped["check_result"].get("suppress_comment", "")
            assert len(reason) > 20, f"{kind}: {skipped['check_id']} skipped without a reason"


def test_only_the_pipeline_publishes_run_outcomes_and_failed_jobs_alert(tf):
    """The notify topic (docs/retraining.md, "Notifications") and the backstop for a run whose exit handler
    never ran: an alert on the project's failed pipeline jobs."""
    topic = tf["resource"]["google_pubsub_topic"]["pipeline_runs"]
    assert topic["name"] == "${var.name}-pipeline-runs"
    publishers = [g for g in grants(tf) if g.role == "roles/pubsub.publisher"]
    assert [(g.member, g.target) for g in publishers] == [(sa("pipeline"), "${google_pubsub_topic.pipeline_runs.id}")]
    [condition] = tf["resource"]["google_monitoring_alert_policy"]["failed_pipeline_jobs"]["conditions"]
    assert "aiplatform.googleapis.com/PipelineJob" in condition["condition_matched_log"][0]["filter"]
    assert {"pubsub.googleapis.com", "monitoring.googleapis.com"} <= set(tf["locals"]["apis"])
