"""`python -m pipeline preflight` with the real storage, resource-manager, aiplatform and
google-auth clients against tests/fake_google_apis.py: a project set up as
infra/terraform sets it up passes; one with a defect in each check fails with
the fix named."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pipeline.cli import main
from pipeline.cloud import google_apis
from pipeline.errors import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK
from pipeline.vertex import preflight as preflight_module
from tests import vertex_support as vs
from tests.fake_google_apis import FakeGoogleApis, Project
from tests.infra_support import load_terraform
from tests.vertex_support import BUCKET, DATAFLOW_SA, PIPELINE_SA, PROJECT, TPU_V5E_QUOTA, terraformed

CONFIG = vs.vertex_config()
TRAINING_SA = CONFIG.vertex.training_service_account
ARGS = ["--config", vs.VERTEX_YAML, "--set", f"vertex.project={PROJECT}", "--set", f"pipeline.root=gs://{BUCKET}/root",
        "--set", f"vertex.service_account={PIPELINE_SA}", "--set", f"dataflow.service_account={DATAFLOW_SA}"]
V5E_QUOTA = f"aiplatform.googleapis.com/{TPU_V5E_QUOTA}"


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
    """Preflight on the spec compiled once per test process (`--spec`, as for a spec `compile` wrote)."""
    code = main(["preflight", *ARGS, "--spec", str(vs.compiled_template()), *endpoint_args, *extra])
    return code, capsys.readouterr().out.splitlines()


def test_a_terraformed_project_passes_every_check(serve, capsys, tmp_path):
    # Without --spec, preflight compiles the config as submit does.
    out = tmp_path / "pipeline.json"
    code = main(["preflight", *ARGS, "-o", str(out), *serve(terraformed())])
    lines = capsys.readouterr().out.splitlines()
    assert code == EXIT_OK, "\n".join(lines)
    assert all(line.startswith("ok ") for line in lines), "\n".join(lines)
    checks = [line[5:].split(": ")[0] for line in lines]
    assert checks == ["spec", "APIs", f"bucket gs://{BUCKET}", "you", "you", f"{PIPELINE_SA} (vertex.service_account)",
                      f"{TRAINING_SA} (vertex.training_service_account)", f"{DATAFLOW_SA} (dataflow.service_account)",
                      f"image {CONFIG.vertex.pipeline_image}", f"image {CONFIG.vertex.trainer_image}",
                      f"subnetwork penguin-dataflow ({PROJECT}/us-central1)", "TPU v5litepod-4 (preset tpu_v5e)"]
    assert lines[2].endswith("readable by you (storage.buckets.get)")
    assert lines[-1].endswith(f"{V5E_QUOTA} in us-central1: 8, the Trainer takes 4 cores")
    assert json.loads(out.read_text())["pipelineSpec"]["root"]["dag"]["tasks"]  # the spec it checked


def test_a_broken_project_fails_each_check_with_its_fix(serve, capsys):
    broken = terraformed()
    broken.enabled_apis.discard("dataflow.googleapis.com")
    broken.caller.discard("iam.serviceAccounts.actAs")
    # The training account may write only the serving dir: not its checkpoints and model.
    broken.grants.discard((TRAINING_SA, "storage.objects.create", vs.OBJECTS + "root/pipeline_root/"))
    broken.grants.add((TRAINING_SA, "storage.objects.create", vs.OBJECTS + "root/serving_model/"))
    broken.images.discard(f"{vs.IMAGES}/packages/pipeline-tpu/tags/0.1.0")
    broken.subnetworks[vs.SUBNET] = False  # the default network's subnets have Private Google Access off
    broken.quotas[V5E_QUOTA].pop("us-central1")  # the default bucket, 0, applies
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
        f"TPU v5litepod-4 (preset tpu_v5e): the Trainer takes 4 cores and {V5E_QUOTA} allows 0 in us-central1; "
        f"fix: request more in IAM & Admin > Quotas ({TPU_V5E_QUOTA}, region us-central1), or set vertex.region",
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
    project = terraformed()
    project.enabled_apis.discard("policytroubleshooter.googleapis.com")
    code, lines = preflight(capsys, serve(project))
    assert code == EXIT_OK
    unknown = [line for line in lines if line.startswith("?")]
    assert len(unknown) == 3 and all("could not check" in line and "SERVICE_DISABLED" not in line
                                     and "policytroubleshooter.googleapis.com has not been used" in line
                                     for line in unknown), "\n".join(lines)
    troubleshoots = [path for method, path in project.requests if path == "/v3/iam:troubleshoot"]
    assert len(troubleshoots) == 1  # asked once, not once per need


def test_a_bucket_you_may_not_read_fails_naming_the_permission_cloud_storage_denied(serve, capsys):
    project = terraformed()
    project.caller.discard("storage.buckets.get")
    code, lines = preflight(capsys, serve(project))
    assert code == EXIT_FAILED
    [line] = [line for line in lines if line[5:].startswith("bucket ")]
    assert line == (f"FAIL bucket gs://{BUCKET}: you may not read it: Cloud Storage denied storage.buckets.get (403); "
                    f"fix: grant yourself storage.buckets.get on gs://{BUCKET}: roles/storage.legacyBucketReader "
                    "(Terraform grants it to var deployers)")


def test_the_permission_is_read_from_cloud_storage_403_bodies():
    # Both ways Cloud Storage words it, and a 403 that names none (the call's own permission is named then).
    from google.api_core.exceptions import Forbidden

    new = Forbidden("GET https://storage.googleapis.com/storage/v1/b/b: x@y.iam.gserviceaccount.com does not "
                    "have storage.objects.list access to the Google Cloud Storage bucket. Permission "
                    "'storage.objects.list' denied on resource (or it may not exist).")
    old = Forbidden("GET https://storage.googleapis.com/storage/v1/b/b: Caller does not have "
                    "storage.objects.get access to object b/o.")
    assert google_apis.denied_permission(new, "storage.buckets.get") == "storage.objects.list"
    assert google_apis.denied_permission(old, "storage.buckets.get") == "storage.objects.get"
    assert google_apis.denied_permission(Forbidden("Forbidden"), "storage.buckets.get") == "storage.buckets.get"


def spec_with_trainer_pool(tmp_path, machine_spec: dict) -> str:
    """The compiled spec with the Trainer CustomJob on `machine_spec`: what compiling another worker pool (or an
    older checkout) writes there, without compiling again."""
    job = json.loads(vs.compiled_template().read_text())
    params = vs.pipeline_tasks(job["pipelineSpec"])["Trainer"]["inputs"]["parameters"]["custom_config"]
    constant = params["runtimeValue"]["constantValue"]
    custom = json.loads(constant["stringValue"])
    for pool in custom["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]:
        pool["machine_spec"] = machine_spec
    constant["stringValue"] = json.dumps(custom)
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(job))
    return str(path)


@pytest.mark.parametrize("overrides, status, detail", [
    (["vertex.worker_pool.preset=tpu_v3"], "ok  ",
     "TPU v3-8 (preset tpu_v3): aiplatform.googleapis.com/custom_model_training_tpu_v3 in us-central1: 8, "
     "the Trainer takes 8 cores"),
    # 2x4 is one host only on ct5lp-hightpu-8t (on the default 4t it is two: the config refuses it).
    (["vertex.worker_pool.machine_type=ct5lp-hightpu-8t", "vertex.worker_pool.tpu_topology=2x4",
      "vertex.region=europe-west4", "dataflow.enabled=false"], "FAIL",
     f"TPU v5litepod-8 (preset tpu_v5e): the Trainer takes 8 cores and {V5E_QUOTA} allows 4 in europe-west4"),
    (["vertex.worker_pool.preset=tpu_v2"], "?   ",
     "TPU v2-8 (preset tpu_v2): no Vertex AI custom-training quota metric is known for it; not checked"),
])
def test_the_tpu_check_reads_vertex_custom_training_quota_for_the_preset(serve, capsys, tmp_path, overrides, status,
                                                                          detail):
    # Dataflow's subnetwork is in us-central1: a run in europe-west4 here runs without Dataflow.
    sets = [a for o in overrides for a in ("--set", o)]
    pool = vs.vertex_config(*overrides).vertex.worker_pool
    main(["preflight", *ARGS, "--spec", spec_with_trainer_pool(tmp_path, pool.machine_spec),
          *serve(terraformed()), *sets])
    [line] = [line for line in capsys.readouterr().out.splitlines() if line[5:].startswith("TPU ")]
    assert line.startswith(f"{status} {detail}"), line


def test_a_spec_whose_trainer_spans_tpu_hosts_fails_the_tpu_check(serve, capsys, tmp_path):
    # What this config refuses to compile, in a spec compiled elsewhere: 2x4 on ct5lp-hightpu-4t is two hosts.
    project = terraformed()
    code = main(["preflight", *ARGS, "--spec", spec_with_trainer_pool(
        tmp_path, {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x4"}), *serve(project)])
    lines = capsys.readouterr().out.splitlines()
    assert code == EXIT_FAILED
    [line] = [line for line in lines if line[5:].startswith("TPU ")]
    assert line.startswith("FAIL TPU (preset tpu_v5e): the spec's Trainer CustomJob: vertex.worker_pool.tpu_topology "
                           "2x4 on ct5lp-hightpu-4t is a slice of 2 hosts (2x2 per host), but Vertex AI runs "
                           "TensorFlow on one TPU host only"), line
    assert "ct5lp-hightpu-8t" in line and "docs/trainer.md#running-on-a-tpu-pod" in line
    assert not any("consumerQuotaMetrics" in path for _, path in project.requests)  # refused before the quota


def test_tuning_passes_the_backend_rules_and_warns_when_its_parallel_trials_exceed_the_tpu_quota(serve, capsys):
    # 3 trials at once on the v5e preset's 4 cores each: 12 cores, and the terraformed project has 8.
    tuning = ("tuning.trials=6", "tuning.parallel_trials=3")
    code = main(["preflight", *ARGS, "--spec", str(vs.compiled_template(*tuning)), *serve(terraformed()),
                 *[a for t in tuning for a in ("--set", t)]])
    lines = capsys.readouterr().out.splitlines()
    assert code == EXIT_OK, "\n".join(lines)  # a warning does not stop submit
    assert lines[0].startswith("ok   spec: keeps the"), lines[0]  # the spec with the Tuner keeps every rule
    assert f"{TRAINING_SA} (vertex.training_service_account)" in "\n".join(lines)
    [line] = [line for line in lines if "tuning" in line]
    assert line.startswith(f"warn TPU for tuning (3 trial(s) at once): 3 parallel trials x 4 cores = 12 cores, above "
                           f"the 8 {V5E_QUOTA} allows in us-central1"), line
    assert line.endswith("fix: set tuning.parallel_trials to 2, or request more quota"), line


def test_without_quota_permission_the_tpu_check_says_why(serve, capsys):
    project = terraformed()
    project.caller.discard("serviceusage.quotas.get")
    code, lines = preflight(capsys, serve(project))
    assert code == EXIT_OK
    [line] = [line for line in lines if line.startswith("?")]
    assert line.startswith("?    TPU quota: could not check: Forbidden") and "serviceusage.quotas.get" in line


def test_every_api_preflight_calls_is_in_its_registry_and_enabled_by_terraform(serve, capsys):
    # A full run: Dataflow on, a TPU preset. Every route of the fake belongs to one API; a call to an API
    # that is not enabled gets SERVICE_DISABLED, so the terraformed project passing shows Terraform enables them.
    project = terraformed()
    code, lines = preflight(capsys, serve(project))
    assert code == EXIT_OK and not any(line.startswith("?") for line in lines), "\n".join(lines)
    registry = {google_apis.service(api) for api in google_apis.APIS}
    assert project.apis_called == registry
    assert registry <= set(load_terraform()["locals"]["apis"])


def test_spec_checks_see_the_job_submit_would_send(serve, capsys, monkeypatch):
    # The seam for checks of the spec itself: each check sees the PipelineJob built as submit builds it.
    seen = []

    def record_and_refuse(sub, g):
        seen.append(sub.job)
        tasks = len(vs.pipeline_tasks(sub.job["pipelineSpec"]))
        return [preflight_module.Result(preflight_module.FAIL, "spec", f"refused, {tasks} tasks")]

    monkeypatch.setattr(preflight_module, "CHECKS", [*preflight_module.CHECKS, ("recorder", record_and_refuse)])
    code, lines = preflight(capsys, serve(terraformed()))
    assert code == EXIT_FAILED and lines[-1].startswith("FAIL spec: refused, ")
    [job] = seen
    compiled = json.loads(vs.compiled_template().read_text())
    assert job["pipelineSpec"] == compiled["pipelineSpec"]
    assert job["runtimeConfig"]["gcsOutputDirectory"] == f"gs://{BUCKET}/root/pipeline_root/penguin-tpu"
    assert job["serviceAccount"] == PIPELINE_SA and job["labels"] == {"app": "penguin-tpu", "env": "prod"}


def test_a_spec_that_breaks_a_backend_rule_fails_preflight_naming_it(serve, capsys, tmp_path):
    # The dry run's up-front rules (pipeline/spec/rules.py), on the spec about to be sent.
    job = json.loads(vs.compiled_template().read_text())
    tasks = vs.pipeline_tasks(job["pipelineSpec"])
    examples = tasks["StatisticsGen"]["inputs"]["artifacts"]["examples"]
    examples["taskOutputArtifact"]["producerTask"] = "CsvExampleGen_task"
    broken = tmp_path / "pipeline.json"
    broken.write_text(json.dumps(job))
    code = main(["preflight", *ARGS, "--spec", str(broken), *serve(terraformed())])
    lines = capsys.readouterr().out.splitlines()
    assert code == EXIT_FAILED
    [line] = [line for line in lines if line.startswith("FAIL")]
    assert line.startswith("FAIL spec: [producer-in-dag] pipelineSpec.components.comp-condition-1.dag.tasks."
                           "StatisticsGen."
                           "inputs.artifacts."
                           "examples.taskOutputArtifact.producerTask: 'CsvExampleGen_task' is not a task"), line


def test_a_spec_file_that_is_not_a_compiled_spec_is_a_config_error(tmp_path, capsys):
    bad = tmp_path / "pipeline.json"
    bad.write_text('{"displayName": "x"}')
    assert main(["preflight", *ARGS, "--spec", str(bad)]) == EXIT_BAD_CONFIG
    assert "no pipelineSpec in it" in capsys.readouterr().err


def test_public_ips_need_no_subnetwork_and_a_cpu_pool_no_tpu(serve, capsys):
    project = terraformed()
    code, lines = preflight(capsys, serve(project), "--set", "dataflow.use_public_ips=true",
                            "--set", "dataflow.subnetwork=null", "--set", "vertex.worker_pool.preset=cpu")
    assert code == EXIT_OK, "\n".join(lines)
    assert "ok   Dataflow network: workers have public IPs (dataflow.use_public_ips)" in lines
    assert not any("TPU" in line for line in lines)
    assert not any("/compute/" in path or "consumerQuotaMetrics" in path for _, path in project.requests)
