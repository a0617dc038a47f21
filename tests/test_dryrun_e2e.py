"""The shipped Vertex config, compiled as submit does and dry-run here twice.

Run 1 is two dry runs at once on one directory: this one and a `python -m pipeline dryrun`
process (pipeline.lock_wait_seconds=0), which runs while this one holds the bucket root's run
lease (fake-gcs-server, pipeline/dryrun/gcs_emulator.py), so the outcome is not left to
a race (with the fork server a dry run can finish before another has started its first task).
They take turns: this one runs the pipeline and pushes, the other exits 5 naming it, and its
exit handler leaves the lease alone.
Run 1 pushes a blessed model trained on the emulated TPU; the bucket's data
then changes, and run 2, compiled with a two-worker CPU pool, must re-ingest
it (Vertex's cache rule: the Snapshot task is not a cache hit), train with two
processes, take run 1's pushed model as its baseline and push again. One run
covers both, as a dry run costs a TFX start-up per task. Training is kept short.
Run 3 is run 2's config again with nothing changed: it stops after its Snapshot and exits 4.
Every run's exit handler tells a Pub/Sub stand-in (tests/fake_pubsub.py) how it ended.
The runs push to a Vertex AI endpoint too (serving.target vertex_endpoint, the stand-in each dry run
starts over the directory's state, pipeline/dryrun/view.py): run 1's version as champion, run 2's as
challenger at the canary share; then `python -m pipeline serving status | promote | rollback --dryrun-dir`
move it, each its own invocation, as a new user would type them. Nothing is held across the runs: the
GCS emulator keeps TF Serving's model config between them, as a bucket does.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from components import training_record
from components.coordination import lease
from components.serving import rollout
from components.serving.model_config import Labels
from pipeline.config import REPO_ROOT, load_config
from pipeline.dryrun.run import dry_run
from pipeline.dryrun.view import ENDPOINTS_STATE, command_view
from pipeline.errors import EXIT_NOTHING_NEW
from pipeline.runs.summary import exit_code
from tests.fake_pubsub import FakePubsub
from tests.vertex_support import raw_example

pytestmark = pytest.mark.e2e

TOPIC = "projects/my-gcp-project/topics/pipeline-runs"
SHORT = ["trainer.train_steps=100", "trainer.eval_every_steps=100", f"notify.pubsub_topic={TOPIC}"]
TWO_WORKERS = ["vertex.worker_pool.preset=cpu", "vertex.worker_pool.extra_workers=1"]
ADDED_ROWS = 30
ENDPOINT = "projects/my-gcp-project/locations/us-central1/endpoints/42"
TO_ENDPOINT = ["serving.target=vertex_endpoint", f"serving.vertex_endpoint.endpoint={ENDPOINT}",
               "serving.vertex_endpoint.model_id=penguin", "serving.vertex_endpoint.accept_older_image_tf=true"]
RIVAL: dict = {}  # the dry run started together with run 1: its exit code and log
THIRD: dict = {}  # run 3: run 2's config again, nothing changed


class _RivalWhileLeaseHeld(io.StringIO):
    """Run 1's console. When run 1's RunLease task is done (it holds the lease), a `python -m pipeline
    dryrun` process on the same directory runs to its end before run 1's next task starts: the two
    overlap for certain, whatever the machine's speed, with nothing of the dry run patched."""

    def __init__(self, command: list[str], log: Path):
        super().__init__()
        self.command, self.log, self.code = command, log, None

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.code is None and "RunLease done in" in text:
            with open(self.log, "w") as log:
                self.code = subprocess.run(self.command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                           timeout=900).returncode
        return written


@pytest.fixture(scope="module")
def pubsub():
    fake = FakePubsub(topics={TOPIC})
    saved = os.environ.get("PUBSUB_EMULATOR_HOST")
    os.environ["PUBSUB_EMULATOR_HOST"] = fake.start()  # the task processes inherit it, the rival's too
    yield fake
    fake.stop()
    if saved is None:
        os.environ.pop("PUBSUB_EMULATOR_HOST")
    else:
        os.environ["PUBSUB_EMULATOR_HOST"] = saved


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, pubsub):
    short = [*SHORT, *TO_ENDPOINT]
    config = load_config("configs/vertex.yaml", short)
    local_dir = tmp_path_factory.mktemp("dryrun")
    second_out = io.StringIO()
    rival_log = local_dir.parent / f"{local_dir.name}-rival.log"
    first_out = _RivalWhileLeaseHeld(
        [sys.executable, "-m", "pipeline", "dryrun", "--config", "configs/vertex.yaml", "--local-dir",
         str(local_dir), *(f"--set={s}" for s in [*short, "pipeline.lock_wait_seconds=0"])], rival_log)
    first = dry_run(config, local_dir, stream=first_out)
    assert first_out.code is not None, "the rival dry run never started: no 'RunLease done' in run 1's console"
    RIVAL.update(code=first_out.code, log=rival_log.read_text())
    csv_path = Path(first.bucket.local(config.data.input_dir)) / "penguins.csv"
    lines = csv_path.read_text().splitlines(keepends=True)
    csv_path.write_text("".join(lines + lines[1:1 + ADDED_ROWS]))  # new data arrives in the bucket
    # The same pipeline, recompiled for a two-worker CPU pool, submitted into the same service and bucket.
    second_config = load_config("configs/vertex.yaml", [*short, *TWO_WORKERS])
    second = dry_run(second_config, local_dir, stream=second_out)
    third_out = io.StringIO()
    THIRD.update(result=dry_run(second_config, local_dir, stream=third_out), console=third_out.getvalue())
    yield config, local_dir, (first, first_out.getvalue()), (second, second_out.getvalue())


def test_first_run_pushes_a_blessed_model_trained_on_emulated_tpu(two_runs):
    _, _, (first, console), _ = two_runs
    run = first.runs[0]
    assert all(t.state == "ran" for t in run.tasks), [(t.name, t.state) for t in run.tasks]
    assert run.summary.blessed is True and run.summary.pushed_path
    assert "BEAM: the DataflowRunner args of" in console and "--runner=DataflowRunner" not in console
    assert "DEVICE EMULATED" in console
    assert "TRAINER CONFIG OVERRIDDEN: custom_config.trainer.strategy 'tpu' -> 'default'" in console
    job = run.custom_jobs[0]
    assert job.state == "SUCCEEDED" and len(job.replicas) == 1
    cluster = json.loads(job.replicas[0].env["CLUSTER_SPEC"])
    assert cluster["task"] == {"type": "workerpool0", "index": 0}
    assert "> Trainer ..." in console and "cache hits: none" in console
    # The Evaluator's auto slices come from the TransformGraph's column roles, which reach its task as the artifact's
    # metadata (components/evaluation/slicing.py): on the backend as locally.
    assert [s["columns"] for s in run.summary.slicing.slices] == [["island"], ["sex"]]


def test_a_dry_run_started_together_with_run_1_takes_turns_and_leaves_it_alone(two_runs):
    config, local_dir, (first, console), (second, _) = two_runs
    code, rival = RIVAL["code"], RIVAL["log"]
    # Exit 5 (RunLocked), naming run 1 as the holder; no traceback in its log.
    assert code == 5, rival[-3000:]
    assert "another run holds gs://" in rival and first.runs[0].job_id in rival, rival[-3000:]
    assert "Traceback" not in rival and "Traceback" not in console
    # Its first task failed, nothing else of it started, and its exit handler ran after the failure:
    # told FAILED, it left run 1's lease alone.
    [job] = re.findall(r"PipelineJob (\S+): ", rival)
    logs = local_dir / "vertex" / config.pipeline.name / "logs" / job
    released = (logs / "ReleaseRunLease.log").read_text()
    assert '"state": "FAILED"' in released and "left alone, it is not this run's" in released
    assert job != first.runs[0].job_id and not (logs / "Trainer.log").exists()
    # Run 1 held the lease from its first task and released it in its exit handler.
    assert "released (run projects/" in (local_dir / "vertex" / config.pipeline.name / "logs" /
                                          first.runs[0].job_id / "ReleaseRunLease.log").read_text()
    # Exactly one new version of the two, loadable (test_both_pushed_models_score_the_raw_csv loads it), with
    # its record; then run 2's. No claim or lease left as a local file.
    serving = Path(first.bucket.local(config.pipeline.serving_dir))
    versions = sorted(p.name for p in serving.iterdir() if p.name.isdigit())
    assert versions == [first.runs[0].summary.pushed_version, second.runs[0].summary.pushed_version]
    assert (serving / versions[0] / "saved_model.pb").is_file()
    assert training_record.read(str(serving), versions[0]) is not None
    assert not (serving / ".claims").exists()
    assert not (Path(first.bucket.local(config.pipeline.root_uri)) / lease.LOCK_FILE).exists()


def test_second_run_reingests_the_changed_data(two_runs):
    _, _, (first, _), (second, console) = two_runs
    run1, run2 = first.runs[0], second.runs[0]
    # Vertex's cache rule: the Snapshot reads a fixed URI, so only caching off for it lets new data in.
    assert run2.task("Snapshot").state != "cached", console
    assert run2.summary.snapshot_digest != run1.summary.snapshot_digest
    assert run2.summary.snapshot_rows == run1.summary.snapshot_rows + ADDED_ROWS
    assert run2.task("CsvExampleGen").state == "ran" and run2.task("Trainer").state == "ran"


def test_second_run_compares_against_the_first_runs_model(two_runs):
    config, _, (first, _), (second, console) = two_runs
    # The model serving now (components/serving/serving_model.py): nothing in run 1, run 1's push in run 2.
    served = [run.runs[0].task("ServingModel").outputs.artifacts["model"] for run in (first, second)]
    assert [a["metadata"]["empty"] for a in served[0]] == [1], console
    assert [a["metadata"]["serving_version"] for a in served[1]] == [first.runs[0].summary.pushed_version], console
    summary = second.runs[0].summary
    assert "sparse_categorical_accuracy" in summary.baseline_metrics
    assert summary.blessed is True and summary.pushed_path != first.runs[0].summary.pushed_path
    # The drift gate's baseline, found at run time: the record run 1's Pusher wrote beside its version.
    record = training_record.read(second.bucket.local(config.pipeline.serving_dir),
                                  first.runs[0].summary.pushed_version)
    assert record is not None and record.snapshot_digest == first.runs[0].summary.snapshot_digest
    assert second.runs[0].task("DriftGate").state == "ran"


def test_both_pushed_models_score_the_raw_csv(two_runs):
    config, _, (first, _), (second, _) = two_runs
    schema = text_format.Parse(Path(first.bucket.local(config.data.schema_file)).read_text(), schema_pb2.Schema())
    rows = list(csv.DictReader(open(Path(first.bucket.local(config.data.input_dir)) / "penguins.csv")))
    for result in (first, second):
        serve = tf.saved_model.load(result.runs[0].summary.pushed_path).signatures["serving_default"]
        requests = [raw_example(row, schema, config).SerializeToString() for row in rows]
        predicted = serve(examples=tf.constant(requests))["class_name"].numpy().tolist()
        truth = [row[config.features.label].encode() for row in rows]
        accuracy = sum(p == t for p, t in zip(predicted, truth)) / len(truth)
        assert accuracy >= 0.9, (result.runs[0].job_id, accuracy)


def test_report_and_metadata_are_local(two_runs):
    _, local_dir, _, (second, console) = two_runs
    assert "report:    " + str(local_dir) in console
    assert Path(second.local_config.pipeline.metadata_path).is_file()


def test_two_worker_pool_trains_with_two_processes(two_runs):
    _, _, _, (second, console) = two_runs
    run = second.runs[0]
    job = run.custom_jobs[0]
    assert job.state == "SUCCEEDED", console
    assert [(r.pool, r.index, r.returncode) for r in job.replicas] == [("workerpool0", 0, 0), ("workerpool1", 0, 0)]
    for replica in job.replicas:
        cluster = json.loads(replica.env["CLUSTER_SPEC"])["cluster"]
        assert len(cluster["workerpool0"]) == 1 and len(cluster["workerpool1"]) == 1
        assert "num_workers = 2" in replica.log.read_text()
    assert run.summary.pushed_path and "DEVICE EMULATED" not in console


def test_a_third_run_with_nothing_changed_stops_after_its_snapshot_and_launches_no_customjob(two_runs):
    config, local_dir, _, (second, _) = two_runs
    third, console = THIRD["result"].runs[0], THIRD["console"]
    assert {t.name: t.state for t in third.tasks} == {
        "RunLease": "ran", "Snapshot": "ran", "condition-1": "not triggered", "tfx-dag": "ran",
        "ReleaseRunLease": "ran"}, console
    assert not third.custom_jobs and "BEAM" in console and "> Transform" not in console
    assert third.summary.nothing_new and "the source is unchanged" in third.summary.nothing_new
    assert exit_code(third.summary) == EXIT_NOTHING_NEW
    serving = Path(second.bucket.local(config.pipeline.serving_dir))
    assert sorted(p.name for p in serving.iterdir() if p.name.isdigit())[-1] == second.runs[0].summary.pushed_version


def test_every_run_tells_the_topic_how_it_ended_the_failed_one_naming_its_task(two_runs, pubsub):
    _, _, (first, _), (second, _) = two_runs
    messages = {m.json()["run"]: m for m in pubsub.published}
    assert len(pubsub.published) == 4 == len(messages), [m.json() for m in pubsub.published]
    run1, run2, run3 = (r.runs[0] for r in (first, second, THIRD["result"]))
    ok = messages[f"projects/my-gcp-project/locations/us-central1/pipelineJobs/{run1.job_id}"].json()
    assert ok["state"] == "SUCCEEDED" and ok["pushed_version"] == run1.summary.pushed_version
    assert ok["metric"] == "accuracy" and 0 < ok["metric_value"] <= 1
    assert ok["link"] == (f"https://console.cloud.google.com/vertex-ai/locations/us-central1/pipelines/runs/"
                          f"{run1.job_id}?project=my-gcp-project")
    [rival] = [m.json() for m in pubsub.published if m.json()["state"] == "FAILED"]
    assert rival["failed_task"] == "RunLease" and run1.job_id not in rival["run"], rival
    assert messages[f"projects/my-gcp-project/locations/us-central1/pipelineJobs/{run2.job_id}"].json()[
        "pushed_version"] == run2.summary.pushed_version
    nothing = messages[f"projects/my-gcp-project/locations/us-central1/pipelineJobs/{run3.job_id}"].json()
    assert nothing["state"] == "SUCCEEDED" and "pushed_version" not in nothing
    assert {m.attributes["state"] for m in pubsub.published} == {"SUCCEEDED", "FAILED"}


def test_after_the_dry_runs_the_serving_commands_show_promote_and_roll_back_the_vertex_endpoint(two_runs, capsys):
    """Last in the module: it moves the labels the tests above read. Each command is its own invocation on the dry
    run's directory, as a new user types it; what the endpoint serves is read back from the stand-in's state."""
    from pipeline.cli import main

    config, local_dir, (first, _), (second, _) = two_runs
    v1, v2 = (int(r.runs[0].summary.pushed_version) for r in (first, second))
    command = ["--config", "configs/vertex.yaml", *(f"--set={s}" for s in [*SHORT, *TO_ENDPOINT, *TWO_WORKERS]),
               "--dryrun-dir", str(local_dir)]

    def endpoint() -> tuple[dict, dict]:
        kept = json.loads((local_dir / ENDPOINTS_STATE).read_text())
        return kept["endpoints"][ENDPOINT], kept["models"]

    served, models = endpoint()
    [model] = models.values()
    uris = [v["artifactUri"] for _, v in sorted(model["versions"].items(), key=lambda kv: int(kv[0]))]
    assert uris == [f"{config.pipeline.serving_dir}/{v}" for v in (v1, v2)]  # gs:// URIs, as Vertex reads them
    assert sorted(served["trafficSplit"].values()) == [10, 90]  # serving.vertex_endpoint.canary_percent

    assert main(["serving", "status", *command]) == 0
    status = capsys.readouterr().out
    assert f"  stable: {v1}: spans" in status and f"  canary: {v2}: spans" in status, status
    assert f"champion: version {v1} " in status and f"challenger: version {v2} " in status, status

    assert main(["serving", "promote", *command]) == 0
    assert f"champion: version {v2} " in capsys.readouterr().out
    served, _ = endpoint()
    assert len(served["deployedModels"]) == 1 and list(served["trafficSplit"].values()) == [100]
    with command_view(config, local_dir) as local:  # models.config is in the emulator, as in a bucket
        assert rollout.labels(local.pipeline.serving_dir) == Labels(v2)

    assert main(["serving", "rollback", *command]) == 0  # no challenger out: the previous champion again
    assert f"champion: version {v1} " in capsys.readouterr().out
    served, _ = endpoint()
    assert [d["modelVersionId"] for d in served["deployedModels"]] == ["1"]
    assert served["trafficSplit"] == {served["deployedModels"][0]["id"]: 100}
    with command_view(config, local_dir) as local:
        base = local.pipeline.serving_dir
        assert rollout.labels(base) == Labels(v1)
        assert {str(v1), str(v2)} <= {p.name for p in Path(base).iterdir()}  # no version deleted
