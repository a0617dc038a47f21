"""`python -m pipeline preflight` with the real storage, resource-manager and google-auth
clients against tests/fake_google_apis.py: a project set up as infra/terraform
sets it up passes; one with a defect in each check fails with the fix named."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.cli import main
from pipeline.errors import EXIT_FAILED, EXIT_OK
from tests import vertex_support as vs
from tests.fake_google_apis import FakeGoogleApis, Project
from tests.vertex_support import BUCKET, DATAFLOW_SA, PIPELINE_SA, PROJECT, terraformed

CONFIG = vs.vertex_config()
TRAINING_SA = CONFIG.vertex.training_service_account
ARGS = ["--config", vs.VERTEX_YAML, "--set", f"vertex.project={PROJECT}", "--set", f"pipeline.root=gs://{BUCKET}/root",
        "--set", f"vertex.service_account={PIPELINE_SA}", "--set", f"dataflow.service_account={DATAFLOW_SA}"]


@pytest.fixture
def serve():
    fakes = []

    def start(project: Project) -> list[str]:
        fake = FakeGoogleApis(project)
        fakes.append(fake)
        return ["--preflight-endpoint", fake.start()]

    yield start
    for fake in fakes:
        fake.stop()


def preflight(capsys, endpoint_args, *extra) -> tuple[int, list[str]]:
    code = main(["preflight", *ARGS, *endpoint_args, *extra])
    return code, capsys.readouterr().out.splitlines()


def test_a_terraformed_project_passes_every_check(serve, capsys):
    code, lines = preflight(capsys, serve(terraformed()))
    assert code == EXIT_OK, "\n".join(lines)
    assert all(line.startswith("ok ") for line in lines), "\n".join(lines)
    checks = [line[5:].split(": ")[0] for line in lines]
    assert checks == ["APIs", f"bucket gs://{BUCKET}", "you", "you", f"{PIPELINE_SA} (vertex.service_account)",
                      f"{TRAINING_SA} (vertex.training_service_account)", f"{DATAFLOW_SA} (dataflow.service_account)",
                      f"image {CONFIG.vertex.pipeline_image}", f"image {CONFIG.vertex.trainer_image}",
                      f"subnetwork penguin-dataflow ({PROJECT}/us-central1)", "TPU v5litepod-4"]
    assert "offered in us-central1-b" in lines[-1]


def test_a_broken_project_fails_each_check_with_its_fix(serve, capsys):
    broken = terraformed()
    broken.enabled_apis.discard("dataflow.googleapis.com")
    broken.caller.discard("iam.serviceAccounts.actAs")
    # The training account may write only the serving dir: not its checkpoints and model.
    broken.grants.discard((TRAINING_SA, "storage.objects.create", vs.OBJECTS + "root/pipeline_root/"))
    broken.grants.add((TRAINING_SA, "storage.objects.create", vs.OBJECTS + "root/serving_model/"))
    broken.images.discard(f"{vs.IMAGES}/packages/pipeline-tpu/tags/0.1.0")
    broken.subnetworks[vs.SUBNET] = False  # the default network's subnets have Private Google Access off
    broken.tpu_types["us-central1-b"].clear()
    code, lines = preflight(capsys, serve(broken))
    assert code == EXIT_FAILED
    failed = {line for line in lines if line.startswith("FAIL")}
    expected = [
        "APIs: not enabled: dataflow.googleapis.com; fix: gcloud services enable dataflow.googleapis.com",
        f"you: may not act as {PIPELINE_SA} (vertex.service_account); fix: grant yourself "
        "roles/iam.serviceAccountUser",
        f"{TRAINING_SA} (vertex.training_service_account): may not write the model and checkpoints "
        f"(gs://{BUCKET}/root/pipeline_root/penguin-tpu/) (storage.objects.create); "
        "fix: grant roles/storage.objectUser",
        f"image {CONFIG.vertex.trainer_image}: not found in Artifact Registry; fix: build and push it",
        f"subnetwork penguin-dataflow ({PROJECT}/us-central1): Private Google Access is off",
        "--enable-private-ip-google-access",
        "TPU v5litepod-4: offered in no zone of us-central1 (preset tpu_v5e); fix: set vertex.region",
    ]
    for text in expected:
        assert any(text in line for line in failed), f"{text!r} not in:\n" + "\n".join(lines)
    assert len(failed) == 6
    # What still works is still reported as working.
    assert any(line.startswith(f"ok   image {CONFIG.vertex.pipeline_image}") for line in lines)


def test_a_missing_bucket_and_account_are_named(serve, capsys):
    broken = dataclasses.replace(terraformed(), buckets={}, accounts={TRAINING_SA, DATAFLOW_SA})
    code, lines = preflight(capsys, serve(broken))
    assert code == EXIT_FAILED
    assert any(f"FAIL bucket gs://{BUCKET}: does not exist (pipeline.root)" in line for line in lines)
    # IAM's 404 for the account is a reason the check could not run, not a crash.
    assert any(line.startswith("?    you: could not check: NotFound") and PIPELINE_SA in line for line in lines)


def test_without_policy_troubleshooter_the_account_checks_say_unknown_and_do_not_fail(serve, capsys):
    project = dataclasses.replace(terraformed(), troubleshooter_error="Policy Troubleshooter API has not been "
                                  "used in project test-project before or it is disabled")
    code, lines = preflight(capsys, serve(project))
    assert code == EXIT_OK
    unknown = [line for line in lines if line.startswith("?")]
    assert len(unknown) == 3 and all("could not check" in line for line in unknown)
    troubleshoots = [path for method, path in project.requests if path == "/v3/iam:troubleshoot"]
    assert len(troubleshoots) == 1  # asked once, not once per need


def test_public_ips_need_no_subnetwork_and_a_cpu_pool_no_tpu(serve, capsys):
    project = terraformed()
    code, lines = preflight(capsys, serve(project), "--set", "dataflow.use_public_ips=true",
                            "--set", "dataflow.subnetwork=null", "--set", "vertex.worker_pool.preset=cpu")
    assert code == EXIT_OK, "\n".join(lines)
    assert "ok   Dataflow network: workers have public IPs (dataflow.use_public_ips)" in lines
    assert not any("TPU" in line for line in lines)
    assert not any("/compute/" in path or "/v2/" in path for _, path in project.requests)
