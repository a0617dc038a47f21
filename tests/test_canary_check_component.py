"""serving.check.before_run: the CanaryCheck component (components/serving/canary_check_component.py) decides on
recorded
TF Serving scrapes and moves only labels, the reason in the label move; in the DAG it is the first step, after the
run lease and before the Snapshot, locally and in the compiled Vertex spec, and never a cache hit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from components.serving import model_config, rollout, serving_dir
from components.serving.canary_check_component import CHECKED_AT, CanaryCheckDriver, CanaryCheckExecutor
from components.serving.model_config import Labels
from pipeline.sections.serving import CheckSection
from tests.test_serving_check import NAME, exposition, record

RULES = CheckSection(min_canary_minutes=30, min_requests=100)


def _serving(tmp_path: Path) -> Path:
    """Versions 1 (stable) and 2 (canary), labelled by two canary pushes two hours ago."""
    base = tmp_path / "serving"
    for number in (1, 2):
        (base / str(number)).mkdir(parents=True)
        (base / str(number) / serving_dir.SAVED_MODEL).write_text(f"graph {number}")
        rollout.after_push(str(base), NAME, number, "canary", f"run-{number}")
    for event in (base / rollout.EVENTS_DIR).iterdir():
        move = json.loads(event.read_text())
        move["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 7200))
        event.write_text(json.dumps(move))
    return base


def _scrapes(metrics: Path, since: float, canary: tuple, minutes: float = 60) -> None:
    for track, (ok, failed, latency) in (("stable", (3000, 3, 5.0)), ("canary", canary)):
        record(metrics, track, since, exposition(0, 0, 1.0, 0))
        record(metrics, track, since + minutes * 60, exposition(ok, failed, latency))


def _run(base: Path, metrics: Path, caplog) -> str:
    caplog.clear()
    with caplog.at_level("INFO"):
        CanaryCheckExecutor().Do({}, {}, {"serving_dir": str(base), "model_name": NAME, "metrics_dir": str(metrics),
                                          "rules": json.dumps(RULES.rules().__dict__)})
    return caplog.text


def test_a_failing_canary_is_rolled_back_before_the_run_and_every_version_stays(tmp_path, caplog):
    base, metrics = _serving(tmp_path), tmp_path / "metrics"
    since = rollout.canary_since(str(base))
    _scrapes(metrics, since, (400, 100, 5.0), minutes=-1)  # scrapes end before the canary is old enough
    assert "wait canary 2" in _run(base, metrics, caplog) and rollout.labels(str(base)) == Labels(1, 2)
    _scrapes(metrics, since, (400, 100, 5.0))
    text = _run(base, metrics, caplog)
    assert "rollback canary 2: canary error rate 20.00% against stable's 0.10%" in text
    assert rollout.labels(str(base)) == Labels(1)
    assert [v.number for v in serving_dir.versions(str(base))] == [1, 2]  # a rollback only moves labels
    last = rollout.events(str(base))[-1]
    assert last.action == "rollback" and "canary 2 dropped: canary error rate 20.00%" in last.note
    assert last.by.startswith("serving check, first step of run ")
    assert model_config.read(str(base)).labels == Labels(1)
    assert "no canary is out (stable 1)" in _run(base, metrics, caplog)  # the next run: nothing to decide


def test_a_good_canary_is_promoted_saying_why(tmp_path, caplog):
    base, metrics = _serving(tmp_path), tmp_path / "metrics"
    _scrapes(metrics, rollout.canary_since(str(base)), (500, 0, 5.0))
    assert "promote canary 2" in _run(base, metrics, caplog)
    assert rollout.labels(str(base)) == Labels(2)
    assert "canary 2 is stable: over 120 min and 500 requests" in rollout.events(str(base))[-1].note


def test_the_driver_makes_every_run_a_cache_miss():
    first, second = (CanaryCheckDriver(None).run(None).exec_properties[CHECKED_AT].string_value for _ in range(2))
    assert first != second


def test_metrics_dir_is_validated():
    from pipeline.config import load_config
    from pipeline.errors import ConfigError
    from tests.conftest import CONFIG

    with pytest.raises(ConfigError, match=r"serving.check.metrics_dir: '\.\.' is not allowed"):
        load_config(CONFIG, ["serving.check.metrics_dir=../elsewhere"])
    config = load_config(CONFIG, ["pipeline.root=/tmp/r"])
    assert config.serving_metrics_dir == "/tmp/r/serving_metrics"


def test_the_local_dag_starts_with_the_check_only_when_enabled():
    from pipeline.config import load_config
    from pipeline.dag.canary import CANARY_CHECK_ID
    from pipeline.dag.pipeline import create_pipeline
    from tests.conftest import CONFIG

    on = create_pipeline(load_config(CONFIG, ["serving.check.before_run=true"]))
    first, snapshot = on.components[0], next(c for c in on.components if c.id == "Snapshot")
    assert first.id == CANARY_CHECK_ID and snapshot.upstream_nodes == {first}
    assert CANARY_CHECK_ID not in {c.id for c in create_pipeline(load_config(CONFIG, [])).components}


def test_the_compiled_vertex_dag_runs_the_check_after_the_run_lease_and_before_the_snapshot():
    from pipeline.dag.canary import CANARY_CHECK_ID
    from pipeline.spec.condition_group import task_dag
    from tests.vertex_support import compiled_template

    # With a Vertex endpoint: the step carries the endpoint target, as the Pusher does (and as the TF Serving
    # target's step, every other parameter alike).
    spec = json.loads(compiled_template("serving.check.before_run=true", "serving.target=vertex_endpoint",
                                        "serving.vertex_endpoint.endpoint=42",
                                        "serving.vertex_endpoint.model_id=penguin",
                                        "serving.vertex_endpoint.accept_older_image_tf=true").read_text())["pipelineSpec"]
    tasks = task_dag(spec)["tasks"]
    check = tasks[CANARY_CHECK_ID]
    assert check["dependentTasks"] == ["RunLease"] and CANARY_CHECK_ID in tasks["Snapshot"]["dependentTasks"]
    assert check["cachingOptions"] == {"enableCache": False}
    params = check["inputs"]["parameters"]
    assert params["lease_owner"]["runtimeValue"]["constantValue"]["stringValue"] == "{{$.pipeline_job_resource_name}}"
    assert params["metrics_dir"]["runtimeValue"]["constantValue"]["stringValue"].endswith("/root/serving_metrics")
    target = json.loads(params["endpoint_target"]["runtimeValue"]["constantValue"]["stringValue"])
    assert target["endpoint"].endswith("/endpoints/42") and target["model_id"] == "penguin"


def test_in_a_compiled_run_it_moves_labels_only_as_the_run_holding_the_lease(gcs_bucket, gcs_emulator, tmp_path,
                                                                            monkeypatch):
    """On gs:// (fake-gcs-server): serving dir and scrapes in the bucket; a run that lost its lease moves nothing
    (LeaseLost), the run holding it rolls the failing canary back."""
    from components.coordination import lease
    from tests.test_run_lease import _expired_lease_of

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)  # the executor's own default clients
    client, root = gcs_bucket.client, f"{gcs_bucket.uri}/root"
    bucket = client.bucket(gcs_bucket.name)
    base = f"{root}/serving"
    for number in (1, 2):
        bucket.blob(f"root/serving/{number}/{serving_dir.SAVED_MODEL}").upload_from_string(f"graph {number}")
        rollout.after_push(base, NAME, number, "canary", f"run-{number}", gcs_client=client)
    for blob in client.list_blobs(bucket, prefix=f"root/serving/{rollout.EVENTS_DIR}/"):
        move = json.loads(blob.download_as_bytes())
        move["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 7200))
        blob.upload_from_string(json.dumps(move))
    since = rollout.canary_since(base, client)
    for track, (ok, failed) in (("stable", (3000, 3)), ("canary", (400, 100))):
        for when, page in ((since, exposition(0, 0, 1.0, 0)), (since + 3600, exposition(ok, failed, 5.0))):
            bucket.blob(f"root/metrics/{track}/{int(when)}.prom").upload_from_string(page)
    properties = {"serving_dir": base, "model_name": NAME, "metrics_dir": f"{root}/metrics",
                  "rules": json.dumps(RULES.rules().__dict__), "lease_root": root, "lease_ttl_seconds": 600.0}
    _expired_lease_of(root, "run-slow", client)
    lease.take_for_run(root, "run-next", 0, 600, gcs_client=client)
    with pytest.raises(lease.LeaseLost):
        CanaryCheckExecutor().Do({}, {}, {**properties, "lease_owner": "run-slow"})
    assert rollout.labels(base, client) == Labels(1, 2)
    CanaryCheckExecutor().Do({}, {}, {**properties, "lease_owner": "run-next"})
    assert rollout.labels(base, client) == Labels(1)
    assert [v.number for v in serving_dir.versions(base, client)] == [1, 2]
    assert rollout.events(base, client)[-1].by == "serving check, first step of run run-next"
