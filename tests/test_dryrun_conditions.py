"""No new span on Vertex: the compiled tasks' trigger conditions, evaluated as the KFP driver does
(pipeline/vertex/dryrun/condition.py), skip everything after the Snapshot, and run it when there is a new span."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from pipeline.vertex.dryrun import condition
from pipeline.vertex.dryrun.spec import SpecError, read_tasks
from tests.vertex_support import compiled_template

SPANS = "data.spans=window(2)"


@pytest.fixture(scope="module")
def tasks():
    spec = json.loads(compiled_template(SPANS).read_text())["pipelineSpec"]
    return {t.name: t for t in read_tasks(spec, [])}


def _input(task, new_span=None, **metadata) -> dict:
    """The ExecutorInput the driver builds for `task`: the Snapshot's artifact wherever the task reads it."""
    if new_span is not None:
        metadata["new_span"] = new_span
    artifact = {"name": "a1", "uri": "gs://b/Snapshot/snapshot", "metadata": metadata}
    return {"inputs": {"artifacts": {key: {"artifacts": [artifact]}
                                     for key, source in task.spec["inputs"]["artifacts"].items()
                                     if source["taskOutputArtifact"]["producerTask"] == "Snapshot"}}}


def test_every_task_after_the_snapshot_runs_only_on_a_new_span(tasks):
    containers = [t for t in tasks.values() if "resolver" not in t.executor and t.name != "Snapshot"]
    assert len(containers) >= 9
    for task in containers:
        assert condition.holds(task, _input(task, 1.0)) is True, task.name
        assert condition.holds(task, _input(task, 0.0)) is False, task.name
        # Struct numbers arrive as doubles; an int still compares numerically, as in cel-go.
        assert condition.holds(task, _input(task, 1)) is True, task.name
    assert condition.condition(tasks["Snapshot"]) == ""
    # Resolvers are compiled without a condition (step_builder.py); they only query metadata.
    assert all(condition.condition(t) == "" for t in tasks.values() if "resolver" in t.executor)


def test_a_snapshot_without_the_property_fails_the_task_as_the_driver_would(tasks):
    with pytest.raises(condition.ConditionError, match="new_span.*no such key"):
        condition.holds(tasks["Trainer"], _input(tasks["Trainer"], rows=3.0))


def _task_with(tasks, text: str):
    trainer = tasks["Trainer"]
    return type(trainer)(trainer.name, {**trainer.spec, "triggerPolicy": {"condition": text}}, trainer.component,
                         trainer.executor_label, trainer.executor, trainer.upstream)


@pytest.mark.parametrize("text, expected", [
    ("!(inputs.artifacts['_Snapshot.snapshot'].artifacts[0].metadata['new_span'] == 1.0)", False),
    ("((inputs.artifacts['_Snapshot.snapshot'].artifacts[0].metadata['new_span'] > 0.5) && "
     "(inputs.artifacts['_Snapshot.snapshot'].artifacts[0].uri == 'gs://b/Snapshot/snapshot'))", True),
    ("((inputs.artifacts['_Snapshot.snapshot'].artifacts[0].metadata['new_span'] < 0.5) || "
     "(inputs.artifacts['_Snapshot.snapshot'].artifacts[0].metadata['new_span'] == 'yes'))", False),
])
def test_the_cel_tfx_writes(tasks, text, expected):
    task = _task_with(tasks, text)
    assert condition.holds(task, _input(task, 1.0)) is expected


@pytest.mark.parametrize("text, error", [
    ("inputs.artifacts['_Snapshot.snapshot'].artifacts[1].metadata['new_span'] == 1.0", condition.ConditionError),
    ("inputs.artifacts['_Snapshot.snapshot'].artifacts[0].metadata['new_span'] < 'a'", condition.ConditionError),
    ("inputs.artifacts['_Snapshot.snapshot'].artifacts[0].metadata['new_span']", condition.ConditionError),
    ("size(inputs.artifacts) > 0", SpecError),
    ("inputs.artifacts['_Snapshot.snapshot'].artifacts[0].metadata['new_span'] in [1.0]", SpecError),
])
def test_what_is_not_the_cel_tfx_writes_is_refused_or_fails(tasks, text, error):
    task = _task_with(tasks, text)
    with pytest.raises(error):
        condition.holds(task, _input(task, 1.0))


def _two_spans_in_the_bucket(tmp_path, rows: int, overrides: list[str] = ()):
    """configs/vertex.yaml on spans (window(2)), and two spans of penguins-like rows in its mapped bucket."""
    from pipeline.config import load_config, resolve
    from pipeline.runs import span_data
    from pipeline.vertex.dryrun.bucket import BucketMap
    from tests.conftest import CONFIG

    config = load_config("configs/vertex.yaml",
                         [SPANS, "data.input_dir=gs://my-gcp-project-penguin-pipeline/spans", *overrides])
    bucket = BucketMap(str(tmp_path))
    span_data.write_spans(resolve("data/penguins/penguins.csv"), bucket.local(config.data.input_dir),
                          span_data.Recipe.from_config(load_config(CONFIG)), count=2, rows=rows)
    return config, bucket


@pytest.mark.e2e
def test_dry_run_with_no_new_span_skips_everything_after_the_snapshot(tmp_path):
    """A real dry run of the compiled spec: a version serves that was trained on the bucket's newest span."""
    from components import training_record
    from components.serving_dir import SAVED_MODEL
    from pipeline.vertex.dryrun.run import dry_run
    from tests.conftest import tree_hashes

    config, bucket = _two_spans_in_the_bucket(tmp_path, rows=40)
    serving = bucket.local(config.pipeline.serving_dir)
    os.makedirs(f"{serving}/1")
    open(f"{serving}/1/{SAVED_MODEL}", "wb").close()
    statistics = tmp_path / "stats"
    (statistics / training_record.TRAIN_SPLIT).mkdir(parents=True)
    (statistics / training_record.TRAIN_SPLIT / training_record.STATISTICS_FILE).write_bytes(b"")
    training_record.write(serving, 1, str(statistics), "gs://elsewhere/model", spans=("span-1", "span-2"))
    before = tree_hashes(Path(serving))

    out = io.StringIO()
    run = dry_run(config, tmp_path, stream=out).runs[0]
    states = {t.name: t.state for t in run.tasks}
    assert states.pop("Snapshot") == "ran", out.getvalue()
    assert {n: s for n, s in states.items() if "resolver" not in n} == dict.fromkeys(
        [n for n in states if "resolver" not in n], "skipped"), out.getvalue()
    # Tasks whose upstream is the Snapshot alone are skipped by their condition, the rest after a skipped upstream.
    assert "CsvExampleGen skipped: its triggerPolicy.condition is false" in out.getvalue()
    assert "Trainer not started: it needs" in out.getvalue()
    assert run.summary.nothing_new and "version 1" in run.summary.nothing_new and "span-2" in run.summary.nothing_new
    assert not run.custom_jobs
    [report] = tmp_path.rglob("report.html")
    assert "no new span: the newest in" in report.read_text()
    assert tree_hashes(Path(serving)) == before


@pytest.mark.e2e
def test_a_schedules_two_runs_train_on_the_new_span_then_skip_without_one(tmp_path):
    """The same compiled spec run twice, as a schedule would: run 1 finds a new span (nothing serves yet), so
    every condition is true and it pushes; run 2 finds no newer span in the record run 1's Pusher wrote."""
    from components import training_record
    from pipeline.vertex.dryrun.run import dry_run

    # Short training; the bar is low because this is about which tasks run, not the model's quality.
    config, bucket = _two_spans_in_the_bucket(tmp_path, rows=170, overrides=[
        "trainer.train_steps=100", "trainer.eval_every_steps=100", "evaluator.lower_bound=0.5",
        "data.analyzer_cache=true"])
    out = io.StringIO()
    first, second = dry_run(config, tmp_path, runs=2, stream=out).runs

    assert all(t.state == "ran" for t in first.tasks), [(t.name, t.state) for t in first.tasks]
    assert first.summary.pushed_version and not first.summary.nothing_new, out.getvalue()
    record = training_record.read(bucket.local(config.pipeline.serving_dir), first.summary.pushed_version)
    assert record is not None and record.spans == ("span-1", "span-2")
    # The span ExampleGen and the analyzer cache run in Vertex's task processes too; the cache lands in the bucket.
    graph = first.summary.output("Transform", "TransformGraph").properties
    assert graph["analyzed_spans"] == "span-1,span-2", graph
    assert (Path(bucket.local(config.pipeline.analyzer_cache_root)) / "LATEST").is_file()

    states = {t.name: t.state for t in second.tasks if "resolver" not in t.name}
    assert states.pop("Snapshot") == "ran" and set(states.values()) == {"skipped"}, out.getvalue()
    assert second.summary.nothing_new and "span-2" in second.summary.nothing_new
    assert second.summary.pushed_version is None
