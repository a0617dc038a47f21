"""infra/: Terraform (parsed with python-hcl2, scanned by checkov), Cloud Build
and the TF Serving manifests, checked for what production relies on. The
images are in test_images.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import hcl2
import pytest
import yaml

INFRA = Path("infra")
TERRAFORM = INFRA / "terraform"
# Roles that grant far more than any of our jobs needs.
BROAD_ROLES = {"roles/owner", "roles/editor", "roles/viewer", "roles/storage.admin", "roles/aiplatform.admin",
               "roles/iam.serviceAccountAdmin", "roles/iam.serviceAccountTokenCreator", "roles/dataflow.admin",
               "roles/dataflow.developer", "roles/storage.objectAdmin"}
_PINNED_IMAGE = re.compile(r"^[\w./-]+(:(?!latest$)[\w.-]*\d[\w.-]*|@sha256:[0-9a-f]{64})$")


def _clean(node):
    """python-hcl2 keeps quotes and adds __meta__ keys; strip both."""
    if isinstance(node, dict):
        return {_clean(k): _clean(v) for k, v in node.items() if not str(k).startswith("__")}
    if isinstance(node, list):
        return [_clean(v) for v in node]
    if isinstance(node, str) and len(node) >= 2 and node[0] == node[-1] == '"':
        return node[1:-1]
    return node


@pytest.fixture(scope="module")
def tf() -> dict:
    """All .tf files merged: {'resource': {type: {name: body}}, 'variable': {...}, 'locals': {...}}."""
    merged: dict = {"resource": {}, "variable": {}, "locals": {}, "output": {}}
    for path in sorted(TERRAFORM.glob("*.tf")):
        doc = _clean(hcl2.loads(path.read_text()))
        for block in doc.get("resource", []):
            for rtype, named in block.items():
                merged["resource"].setdefault(rtype, {}).update(named)
        for kind in ("variable", "output"):
            for block in doc.get(kind, []):
                merged[kind].update(block)
        for block in doc.get("locals", []):
            merged["locals"].update(block)
    return merged


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
    assert set(accounts) == {"pipeline", "training", "serving"}
    assert {a["account_id"] for a in accounts.values()} == {"${var.name}-pipeline", "${var.name}-training",
                                                            "${var.name}-serving"}


def _grants(tf) -> list[tuple[str, str, str]]:
    """(resource address, role, member) for every IAM grant, with for_each maps expanded."""
    grants = []
    for rtype, named in tf["resource"].items():
        if "iam_member" not in rtype:
            continue
        for name, body in named.items():
            if body["role"] == "${each.value.role}":
                source = tf["locals"][body["for_each"].removeprefix("${local.").removesuffix("}")]
                grants += [(f"{rtype}.{name}[{k}]", v["role"], f"serviceAccount:{v['sa']}") for k, v in source.items()]
            elif isinstance(body.get("for_each"), dict):
                grants += [(f"{rtype}.{name}[{k}]", body["role"], body["member"].replace("${each.value}", v))
                           for k, v in body["for_each"].items()]
            else:
                grants.append((f"{rtype}.{name}", body["role"], body["member"]))
    return grants


def test_least_privilege_roles(tf):
    grants = _grants(tf)
    assert grants, "no IAM grants found"
    for address, role, _ in grants:
        assert role not in BROAD_ROLES, f"{address} grants {role}"
    # Storage access is granted on the bucket, never project-wide.
    project_roles = {role for address, role, _ in grants if address.startswith("google_project_iam_member")}
    assert not any(role.startswith("roles/storage.") for role in project_roles), project_roles
    by_member = {}
    for _, role, member in grants:
        by_member.setdefault(member, set()).add(role)
    serving = by_member["serviceAccount:${google_service_account.serving.email}"]
    assert serving == {"roles/logging.logWriter", "roles/storage.objectViewer", "roles/artifactregistry.reader"}
    training = by_member["serviceAccount:${google_service_account.training.email}"]
    assert "roles/aiplatform.user" not in training and "roles/iam.serviceAccountUser" not in training


def test_dataflow_launcher_role_is_narrow(tf):
    role = tf["resource"]["google_project_iam_custom_role"]["dataflow_launcher"]
    assert role["permissions"] and all(p.startswith("dataflow.") for p in role["permissions"])


def test_pipeline_may_act_only_as_itself_and_the_training_account(tf):
    acts_as = {name: body for name, body in tf["resource"]["google_service_account_iam_member"].items()
               if body["role"] == "roles/iam.serviceAccountUser"
               and body["member"] == "serviceAccount:${google_service_account.pipeline.email}"}
    assert {b["service_account_id"] for b in acts_as.values()} == {
        "${google_service_account.training.name}", "${google_service_account.pipeline.name}"}


def test_required_apis_and_variables(tf):
    apis = set(tf["locals"]["apis"])
    assert {"aiplatform.googleapis.com", "dataflow.googleapis.com", "artifactregistry.googleapis.com",
            "storage.googleapis.com", "iam.googleapis.com"} <= apis
    assert {"project_id", "region"} <= set(tf["variable"])
    assert all(v.get("description") for v in tf["variable"].values())
    repo = tf["resource"]["google_artifact_registry_repository"]["images"]
    assert repo["format"] == "DOCKER" and repo["docker_config"][0]["immutable_tags"] is True


def test_terraform_parses_and_is_formatted():
    """terraform's own parser; `validate` would need the provider download, which needs the network."""
    if shutil.which("terraform") is None:
        pytest.skip("terraform is not installed")
    result = subprocess.run(["terraform", "fmt", "-check", "-diff", "-recursive", str(TERRAFORM)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_checkov_suppressions_give_reasons():
    sources = [*TERRAFORM.glob("*.tf"), INFRA / "docker" / "Dockerfile", INFRA / "docker" / "Dockerfile.tpu"]
    skips = re.findall(r"#\s*checkov:skip=([A-Z0-9_]+)(:?)(.*)", "".join(p.read_text() for p in sources))
    skips += re.findall(r"checkov\.io/skip\d+: ([A-Z0-9_]+)(=?)(.*)", (INFRA / "serving" / "k8s.yaml").read_text())
    assert len(skips) >= 7, f"expected at least the 7 documented suppressions, found {skips}"
    for check, separator, reason in skips:
        assert separator and len(reason.strip()) > 20, f"{check} is suppressed without a reason"


def test_checkov_finds_no_failed_checks():
    """Terraform, Dockerfiles and the Kubernetes manifest; suppressions must carry a reason."""
    checkov = Path(".venv-tools/bin/checkov")
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


def test_cloudbuild_builds_tests_compiles_and_uploads():
    build = yaml.safe_load((INFRA / "cloudbuild.yaml").read_text())
    steps = {s["id"]: s for s in build["steps"]}
    assert {"build-pipeline-image", "build-tpu-image", "test", "push-pipeline-image", "push-tpu-image",
            "compile", "upload-spec"} <= set(steps)
    for step in build["steps"]:
        assert _PINNED_IMAGE.match(step["name"]), f"step {step['id']} image {step['name']!r} is not pinned"
    assert "infra/docker/Dockerfile.tpu" in steps["build-tpu-image"]["args"]
    assert "pytest" in steps["test"]["args"]
    compile_args = steps["compile"]["args"]
    assert compile_args[compile_args.index("-m") + 1:][:2] == ["pipeline", "compile"]
    assert "vertex.trainer_image=${_TRAINER_IMAGE}" in compile_args
    # The spec is compiled only after the images it names were pushed.
    assert set(steps["compile"]["waitFor"]) == {"push-pipeline-image", "push-tpu-image"}
    assert steps["upload-spec"]["args"][-1].startswith("gs://${_BUCKET}/")


def test_compose_serves_the_pushed_model_with_health_check():
    compose = yaml.safe_load((INFRA / "serving" / "docker-compose.yaml").read_text())
    svc = compose["services"]["tf-serving"]
    assert _PINNED_IMAGE.match(svc["image"])
    assert {"--port=8500", "--rest_api_port=8501", "--model_name=penguin-tpu",
            "--model_base_path=/models/penguin-tpu"} <= set(svc["command"])
    assert {p.rsplit(":", 1)[-1].split()[0] for p in svc["ports"]} == {"8500", "8501"}
    assert "/v1/models/penguin-tpu" in " ".join(svc["healthcheck"]["test"])
    assert svc["volumes"][0].endswith(":/models/penguin-tpu:ro")


def test_k8s_manifest_reads_gcs_and_probes_both_ports():
    docs = {d["kind"]: d for d in yaml.safe_load_all((INFRA / "serving" / "k8s.yaml").read_text())}
    assert {"Namespace", "ServiceAccount", "Deployment", "Service", "NetworkPolicy"} <= set(docs)
    assert {d["metadata"].get("namespace") for k, d in docs.items() if k != "Namespace"} == {"penguin-serving"}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert _PINNED_IMAGE.match(container["image"])
    base = next(a for a in container["args"] if a.startswith("--model_base_path="))
    assert base.startswith("--model_base_path=gs://") and base.endswith("/serving_model/penguin-tpu")
    assert {p["containerPort"] for p in container["ports"]} == {8500, 8501}
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models/penguin-tpu"
    assert container["livenessProbe"]["tcpSocket"]["port"] == "grpc"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert docs["ServiceAccount"]["metadata"]["annotations"]["iam.gke.io/gcp-service-account"].startswith(
        "penguin-serving@")
    assert {p["port"] for p in docs["Service"]["spec"]["ports"]} == {8500, 8501}
