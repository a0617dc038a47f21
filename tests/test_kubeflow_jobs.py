"""`python -m pipeline submit|schedule` with pipeline.target kubeflow, through the real kfp.Client,
against the KFP v2beta1 stand-in (tests/fake_kfp.py: the server's rules and their sources)."""

from __future__ import annotations

import socket

import pytest
import yaml

from pipeline.cli import main
from pipeline.config import load_config
from pipeline.errors import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK
from pipeline.kubeflow.compile import load_spec
from tests.fake_google_apis import FakeGoogleApis
from tests.fake_kfp import FakeKfp
from tests.kubeflow_support import BUCKET, KUBEFLOW_YAML, compiled_package

TOKEN = "kfp-test-token"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def kfp(monkeypatch, tmp_path):
    import kfp.client.client as kfp_client

    # kfp.Client reads ~/.config/kfp/context.json; keep this machine's out of the tests.
    monkeypatch.setattr(kfp_client.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp-context.json"))
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    fake = FakeKfp(token=TOKEN)
    url = fake.start()
    args = ["--config", KUBEFLOW_YAML, "--set", f"kubeflow.host={url}", "--set", f"pipeline.root=gs://{BUCKET}/root",
            "--skip-preflight"]
    yield fake, args, ["--spec", str(compiled_package())]
    fake.stop()


def _spec(value: dict):
    """A pipeline spec as the proto it is, so the JSON spelling (camelCase or not) does not matter."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    return json_format.ParseDict(value, pipeline_spec_pb2.PipelineSpec())


def test_submit_sends_a_run_of_the_compiled_spec(kfp, capsys):
    fake, args, package = kfp
    code, out, err = run(capsys, "submit", *args, *package)
    assert code == EXIT_OK, err
    [run_] = fake.runs.values()
    assert f"submitted run {run_['run_id']} (experiment penguin-tpu, namespace kubeflow)" in out
    # What we compiled, per-task caching options included, is what the server got, with its platform spec (the pod
    # label for the API token, pipeline/kubeflow/compile.py) as kfp.Client sends one: {pipeline_spec, platform_spec}.
    from pipeline.kubeflow.compile import load_platform_spec

    assert _spec(run_["pipeline_spec"]["pipeline_spec"]) == _spec(load_spec(compiled_package()))
    assert run_["pipeline_spec"]["platform_spec"] == load_platform_spec(compiled_package()) == fake.platform_specs[0]
    assert run_["runtime_config"]["pipeline_root"] == f"gs://{BUCKET}/root/pipeline_root/penguin-tpu"
    assert run_["service_account"] == "penguin-pipeline"
    assert run_["display_name"].startswith("penguin-tpu-")
    [experiment] = fake.experiments.values()
    assert (experiment["display_name"], experiment["namespace"]) == ("penguin-tpu", "kubeflow")
    assert run_["experiment_id"] == experiment["experiment_id"]
    assert {r.headers.get("authorization") for r in fake.requests} == {f"Bearer {TOKEN}"}


def test_submit_wait_follows_the_run_to_its_end(kfp, capsys):
    fake, args, package = kfp
    code, out, _ = run(capsys, "submit", *args, *package, "--wait", "--poll-seconds", "0")
    assert code == EXIT_OK
    assert [line.split()[-1] for line in out.splitlines() if line[:2].isdigit()] == ["RUNNING", "SUCCEEDED"]
    fake.run_states, fake.run_error = ["RUNNING", "FAILED"], "Trainer: OOMKilled"
    code, out, _ = run(capsys, "submit", *args, *package, "--wait", "--poll-seconds", "0")
    assert code == EXIT_FAILED
    assert "error: Trainer: OOMKilled" in out


def test_the_server_refuses_a_spec_that_is_not_2_1(kfp, capsys, tmp_path):
    """Why compile.py asks TFX for pipeline spec 2.1.0: the Vertex form (2.0.0) is refused."""
    fake, args, _ = kfp
    spec = next(yaml.safe_load_all(compiled_package().read_text()))
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({**spec, "schemaVersion": "2.0.0"}))
    code, _, err = run(capsys, "submit", *args, "--spec", str(old))
    assert code == EXIT_FAILED
    assert "creating the run: HTTP 400: KFP only supports schema version 2.1.0" in err
    assert fake.runs == {}


def test_schedule_create_list_pause_resume_delete(kfp, capsys):
    fake, args, package = kfp
    code, out, _ = run(capsys, "schedule", "create", *args, *package, "--cron", "0 3 * * 1",
                       "--start-time", "2027-01-04T03:00:00+01:00", "--max-concurrent-runs", "2")
    assert code == EXIT_OK, out
    [job] = fake.recurring_runs.values()
    job_id = job["recurring_run_id"]
    assert f"created {job_id}  penguin-tpu-retraining  ENABLED" in out
    # Second 0, 03:00, Mondays: the 5-field cron in robfig/cron's seconds-first form.
    assert job["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * 1"
    assert job["trigger"]["cron_schedule"]["start_time"] == "2027-01-04T02:00:00Z"
    assert (job["mode"], job["max_concurrency"], job["no_catchup"]) == ("ENABLE", "2", True)
    assert fake.sent("POST", "/recurringruns$")[0].body["max_concurrency"] == 2
    assert _spec(job["pipeline_spec"]["pipeline_spec"]) == _spec(load_spec(compiled_package()))
    assert job["runtime_config"]["pipeline_root"] == f"gs://{BUCKET}/root/pipeline_root/penguin-tpu"

    def listed() -> str:
        code, out, _ = run(capsys, "schedule", "list", *args)
        assert code == EXIT_OK
        return out

    assert f"{job_id}  penguin-tpu-retraining  ENABLED  cron='0 0 3 * * 1'" in listed()
    assert run(capsys, "schedule", "pause", job_id, *args)[0] == EXIT_OK
    assert (job["mode"], job["status"]) == ("DISABLE", "DISABLED")
    assert "DISABLED" in listed()
    assert run(capsys, "schedule", "resume", job_id, *args)[0] == EXIT_OK
    assert (job["mode"], job["status"]) == ("ENABLE", "ENABLED")
    assert run(capsys, "schedule", "delete", job_id, *args)[0] == EXIT_OK
    assert fake.recurring_runs == {}
    assert "no recurring runs in experiment penguin-tpu" in listed()
    code, _, err = run(capsys, "schedule", "pause", job_id, *args)
    assert code == EXIT_FAILED and "not found (404)" in err


@pytest.mark.parametrize("flags, message", [
    (["--cron", "TZ=Europe/Berlin 0 3 * * 1"], "takes no time zone"),
    (["--cron", "0 3 * * 7"], "days of the week 0-6"),
    (["--cron", "0 3 * *"], "expected 5 fields"),
    (["--cron", "0 3 * * 1", "--max-concurrent-runs", "11"], "takes 1-10"),
    (["--cron", "0 3 * * 1", "--max-run-count", "3"], "no run limit"),
])
def test_schedule_settings_are_checked_before_any_request(kfp, capsys, flags, message):
    fake, args, package = kfp
    code, _, err = run(capsys, "schedule", "create", *args, *package, *flags)
    assert code == EXIT_BAD_CONFIG
    assert message in err
    assert fake.requests == []


def test_schedule_ids_are_checked(kfp, capsys):
    fake, args, _ = kfp
    code, _, err = run(capsys, "schedule", "pause", "123", *args)
    assert code == EXIT_BAD_CONFIG and "expected a KFP recurring run id" in err
    assert fake.requests == []


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("settings, env, message", [
    ([], {"KFP_TOKEN": None}, "kubeflow.token_env names KFP_TOKEN, which is not set"),
    (["kubeflow.token_env=", "kubeflow.token_file=no/such/token"], {},
     "kubeflow.token_file 'no/such/token': no such file"),
    (["kubeflow.token_file=x"], {}, "set one of kubeflow.token_file and kubeflow.token_env"),
    (["kubeflow.token_file=../secrets/token", "kubeflow.token_env="], {}, "'..' is not allowed"),
    (["kubeflow.host=http://kfp.example.com"], {}, "plain http is only allowed to this machine"),
    (["kubeflow.host=ftp://127.0.0.1"], {}, "expected http(s)://host[:port][/path]"),
    (["kubeflow.host=https://user:pw@kfp.example.com"], {}, "without credentials"),
    (["kubeflow.namespace=Team_A"], {}, "not a valid Kubernetes namespace"),
    (["kubeflow.service_account=Pipeline Runner"], {}, "not a valid Kubernetes service account"),
    (["kubeflow.token_env=kfp-token"], {}, "not a valid environment variable name"),
    (["kubeflow.pipeline_image=pipeline:latest"], {}, "pinned by tag or digest"),
    (["pipeline.target=vertex"], {}, "set pipeline.target: kubeflow"),
    (["data.input_dir=data/penguins"], {}, "data.input_dir must be a gs:// URI when the kubeflow section is set"),
])
def test_bad_settings_are_config_errors(kfp, capsys, monkeypatch, settings, env, message):
    fake, args, package = kfp
    for key, value in env.items():
        monkeypatch.delenv(key) if value is None else monkeypatch.setenv(key, value)
    overrides = [x for s in settings for x in ("--set", s)]
    code, _, err = run(capsys, "submit", *args, *package, *overrides)
    assert code == EXIT_BAD_CONFIG, err
    assert message in err
    assert fake.requests == []


def test_a_token_file_is_read_and_sent(kfp, capsys, tmp_path, monkeypatch):
    fake, args, package = kfp
    monkeypatch.delenv("KFP_TOKEN")
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    code, _, err = run(capsys, "submit", *args, *package, "--set", "kubeflow.token_env=",
                       "--set", f"kubeflow.token_file={token}")
    assert code == EXIT_OK, err
    assert {r.headers.get("authorization") for r in fake.requests} == {f"Bearer {TOKEN}"}


def test_a_refused_token_and_a_dead_host_are_clear_failures(kfp, capsys, monkeypatch):
    fake, args, package = kfp
    monkeypatch.setenv("KFP_TOKEN", "someone-elses")
    code, _, err = run(capsys, "submit", *args, *package)
    assert code == EXIT_FAILED
    assert "not authenticated (401)" in err and "$KFP_TOKEN" in err
    assert fake.runs == {}
    code, _, err = run(capsys, "submit", *args, *package, "--set", f"kubeflow.host=http://127.0.0.1:{_dead_port()}")
    assert code == EXIT_FAILED
    assert "cannot reach the KFP API server at http://127.0.0.1:" in err


def test_vertex_only_flags_are_refused(kfp, capsys):
    fake, args, package = kfp
    for flags, message in ((["--api-endpoint", "http://127.0.0.1:1"], "--api-endpoint is for Vertex AI"),
                           (["--job-id", "x"], "--job-id is for Vertex AI")):
        code, _, err = run(capsys, "submit", *args, *package, *flags)
        assert code == EXIT_BAD_CONFIG and message in err
    assert fake.requests == []


def test_a_spec_the_command_would_not_use_is_refused_not_ignored(kfp, capsys):
    fake, args, package = kfp
    code, _, err = run(capsys, "preflight", *[a for a in args if a != "--skip-preflight"], *package)
    assert code == EXIT_BAD_CONFIG and "dryrun --backend kubeflow --spec FILE" in err
    vertex = ["--config", "configs/vertex.yaml", "--skip-preflight"]
    code, _, err = run(capsys, "submit", *vertex, *package)
    assert code == EXIT_BAD_CONFIG and "submit --spec is for pipeline.target kubeflow" in err
    assert fake.requests == []


def test_preflight_checks_the_api_server_bucket_and_image(kfp, capsys, monkeypatch):
    from pipeline.cloud import images
    from tests.fake_google_apis import FakeGoogleApis, Project

    fake, args, _ = kfp
    image = images.parse(load_config(KUBEFLOW_YAML).kubeflow.pipeline_image)
    project = Project(project=image.project, enabled_apis={"storage.googleapis.com", "artifactregistry.googleapis.com"},
                      buckets={BUCKET: "US-CENTRAL1"}, caller={"storage.buckets.get"}, accounts=set(), grants=set(),
                      images={image.api_path}, subnetworks={}, quotas={})
    google = FakeGoogleApis(project)
    endpoint = google.start()
    host = next(a.split("=", 1)[1] for a in args if a.startswith("kubeflow.host="))
    checks = [*(a for a in args if a != "--skip-preflight"), "--preflight-endpoint", endpoint]
    try:
        code, out, _ = run(capsys, "preflight", *checks)
        assert code == EXIT_OK, out
        assert f"ok   KFP API {host}: answers (single-user)" in out
        assert f"ok   bucket gs://{BUCKET}: exists" in out
        assert "?    bucket" in out and "Workload Identity" in out  # what cannot be checked from here
        assert "ok   image us-central1-docker.pkg.dev/my-gcp-project/penguin/pipeline:0.1.0: exists" in out
        assert "ok   KFP backend version: 2.5.0 (the spec needs 2.5.0 or later)" in out
        fake.tag_name = "2.3.0"
        code, out, _ = run(capsys, "preflight", *checks)
        assert code == EXIT_FAILED
        assert "FAIL KFP backend version: " in out and "is Kubeflow Pipelines 2.3.0; the compiled pipeline needs " \
            "2.5.0 or later" in out, out
        fake.tag_name = "2.5.0"
        fake.multi_user = True
        project.images.clear()
        code, out, _ = run(capsys, "preflight", *checks)
        assert code == EXIT_FAILED
        assert "FAIL kubeflow.namespace: multi-user Kubeflow runs pipelines in profile namespaces" in out
        assert "FAIL image us-central1-docker.pkg.dev/my-gcp-project/penguin/pipeline:0.1.0: not found" in out
        monkeypatch.setenv("KFP_TOKEN", "wrong")
        code, out, _ = run(capsys, "preflight", *checks)
        assert code == EXIT_FAILED and f"FAIL KFP API {host}" in out and "not authenticated (401)" in out
    finally:
        google.stop()


def test_preflight_names_what_the_pods_account_may_not_do_for_each_enabled_option(kfp, capsys):
    """The pods' Google account (kubeflow.google_service_account), asked of Policy Troubleshooter as for Vertex: the
    bucket, the notify topic, the Vertex endpoint and Cloud Monitoring. An option turned on without its grant
    (infra/kubeflow's variable left off) used to surface mid-run as PERMISSION_DENIED: a lost notification, a
    version published but not deployed, a first step that fails."""
    from pipeline.cloud import images
    from tests.fake_google_apis import Project

    fake, args, _ = kfp
    account = "penguin-kfp-pipeline@my-gcp-project.iam.gserviceaccount.com"
    topic = "projects/my-gcp-project/topics/penguin-pipeline-runs"
    project = "//cloudresourcemanager.googleapis.com/projects/my-gcp-project"
    options = [f"notify.pubsub_topic={topic}", "serving.target=vertex_endpoint", "serving.check.before_run=true",
               "serving.vertex_endpoint.endpoint=projects/my-gcp-project/locations/us-central1/endpoints/42",
               "serving.vertex_endpoint.model_id=penguin", "serving.vertex_endpoint.accept_older_image_tf=true"]
    checks = [a for a in args if a != "--skip-preflight"] + [x for o in options for x in ("--set", o)]
    image = images.parse(load_config(KUBEFLOW_YAML).kubeflow.pipeline_image)
    # As infra/kubeflow grants it with every option's variable on (tests/test_kubeflow_infra.py holds the module
    # to these): objectUser on the bucket, the topic's publisher, aiplatform.user, the metrics reader.
    granted = {(account, "storage.objects.create", f"//storage.googleapis.com/projects/_/buckets/{BUCKET}/objects/"),
               (account, "pubsub.topics.publish", f"//pubsub.googleapis.com/{topic}"),
               (account, "aiplatform.models.upload", project), (account, "aiplatform.endpoints.deploy", project),
               (account, "monitoring.timeSeries.list", project)}
    google = FakeGoogleApis(Project(
        project=image.project, enabled_apis={"storage.googleapis.com", "artifactregistry.googleapis.com",
                                             "policytroubleshooter.googleapis.com"},
        buckets={BUCKET: "US-CENTRAL1"}, caller={"storage.buckets.get"}, accounts={account}, grants=granted,
        images={image.api_path}, subnetworks={}, quotas={}))
    checks += ["--preflight-endpoint", google.start()]
    try:
        code, out, _ = run(capsys, "preflight", *checks)
        assert code == EXIT_OK and "?    the pods' Google service account: not checked" in out
        assert "the run needs pubsub.topics.publish to publish each run's outcome" in out
        checks += ["--set", f"kubeflow.google_service_account={account}"]
        code, out, _ = run(capsys, "preflight", *checks)
        assert code == EXIT_OK and f"ok   {account} (kubeflow.google_service_account): may write step outputs" in out
        google.p.grants.discard((account, "pubsub.topics.publish", f"//pubsub.googleapis.com/{topic}"))
        code, out, _ = run(capsys, "preflight", *checks)
        assert code == EXIT_FAILED
        assert (f"FAIL {account} (kubeflow.google_service_account): may not publish each run's outcome "
                "(notify.pubsub_topic) (pubsub.topics.publish); fix: grant roles/pubsub.publisher on the topic "
                "(infra/kubeflow's `terraform apply` with the variable of each enabled option does)") in out, out
    finally:
        google.stop()


@pytest.mark.parametrize("tag, said", [("2.3.0", "is Kubeflow Pipelines 2.3.0; the compiled pipeline needs 2.5.0"),
                                       ("unknown", "does not say which release it is (healthz tag_name 'unknown')")])
def test_submit_and_schedule_refuse_a_backend_older_than_the_spec_needs(kfp, capsys, tag, said):
    """Even with --skip-preflight: the version is checked on every connection (pipeline/kubeflow/client.py)."""
    fake, args, package = kfp
    fake.tag_name = tag
    code, _, err = run(capsys, "submit", *args, *package)
    assert code == EXIT_FAILED and said in err, err
    code, _, err = run(capsys, "schedule", "create", "--cron", "0 3 * * 1", *args, *package)
    assert code == EXIT_FAILED and said in err, err
    assert not fake.runs and not fake.recurring_runs and not fake.sent("POST", "/experiments$")
    fake.tag_name = "v2.14.3"
    code, _, err = run(capsys, "submit", *args, *package)
    assert code == EXIT_OK, err
