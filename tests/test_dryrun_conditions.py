"""No new span on Vertex: the compiled spec's one condition task (pipeline/spec/condition_group.py),
evaluated as the KFP driver does (pipeline/spec/condition.py), skips everything after the Snapshot,
and runs it when there is a new span."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from pipeline.errors import SpecError
from pipeline.spec import condition, model
from pipeline.spec.condition_group import GROUP_TASK, TFX_DAG, channel
from tests.vertex_support import compiled_template

SPANS = "data.spans=window(2)"
SNAPSHOT_INPUT = channel("Snapshot", "snapshot")
DECISION_INPUT = channel("Snapshot", "new_data")


@pytest.fixture(scope="module")
def pipeline():
    return model.read(json.loads(compiled_template(SPANS).read_text())["pipelineSpec"])


def _tasks(pipeline) -> dict:
    """The pipeline's tasks, in the exit handler's `tfx-dag` sub-DAG (pipeline/dag/run_lease.py)."""
    return pipeline.sub_dag(pipeline.root.tasks[TFX_DAG]).tasks


# A run: the exit handler's sub-DAG, the lease taken, the Snapshot, the condition group, the lease released.
def _skipped_run(group_state: str) -> list:
    return [(TFX_DAG, "ran"), ("RunLease", "ran"), ("Snapshot", "ran"), (GROUP_TASK, group_state),
            ("ReleaseRunLease", "ran")]


def _input(new_span=None, **metadata) -> dict:
    """The ExecutorInput the DAG driver builds for the condition task: the Snapshot's artifact."""
    if new_span is not None:
        metadata["new_span"] = new_span
    artifact = {"name": "a1", "uri": "gs://b/Snapshot/snapshot", "metadata": metadata}
    return {"inputs": {"artifacts": {SNAPSHOT_INPUT: {"artifacts": [artifact]}}}}


def _decision(value=None) -> dict:
    """The ExecutorInput the DAG driver builds for the condition task: the Snapshot's output parameter."""
    return {"inputs": {"parameterValues": {} if value is None else {DECISION_INPUT: value}}}


def _holds(text: str, executor_input: dict) -> bool:
    return condition.evaluate(condition.parse(text, "field"), executor_input, "field")


def test_everything_after_the_snapshot_is_one_condition_task_as_the_kfp_sdk_compiles_dsl_if(pipeline):
    assert set(_tasks(pipeline)) == {"RunLease", "Snapshot", GROUP_TASK}
    group = _tasks(pipeline)[GROUP_TASK]
    assert group.kind == "dag" and group.upstream == ("RunLease", "Snapshot")
    inner = pipeline.sub_dag(group)
    assert len(inner.tasks) >= 10 and {"CsvExampleGen", "Trainer", "Pusher"} <= set(inner.tasks)
    # The children carry no condition and read the Snapshot through the group's input.
    assert not [t.name for t in inner.tasks.values() if t.condition]
    assert all("Snapshot" not in t.upstream for t in inner.tasks.values())
    # It reads the Snapshot's output parameter, as dsl.If compiles (a Struct number: a double).
    assert group.inputs("parameters")[DECISION_INPUT] == {
        "taskOutputParameter": {"producerTask": "Snapshot", "outputParameterKey": "new_data"}}
    assert _holds(group.condition, _decision(1.0)) is True
    assert _holds(group.condition, _decision(0.0)) is False
    assert _holds(group.condition, _decision(1)) is True


def test_a_snapshot_without_its_decision_fails_the_condition_as_the_driver_would(pipeline):
    with pytest.raises(condition.ConditionError, match="new_data.*no such key"):
        _holds(_tasks(pipeline)[GROUP_TASK].condition, _decision())
    with pytest.raises(condition.ConditionError, match="no such overload: int"):
        _holds(_tasks(pipeline)[GROUP_TASK].condition, _decision(True))


NEW_SPAN = f"inputs.artifacts['{SNAPSHOT_INPUT}'].artifacts[0].metadata['new_span']"
MISSING = f"inputs.artifacts['{SNAPSHOT_INPUT}'].artifacts[0].metadata['missing']"


@pytest.mark.parametrize("text, expected", [
    (f"!({NEW_SPAN} == 1.0)", False),
    (f"(({NEW_SPAN} > 0.5) && (inputs.artifacts['{SNAPSHOT_INPUT}'].artifacts[0].uri == 'gs://b/Snapshot/snapshot'))",
     True),
    (f"(({NEW_SPAN} < 0.5) || ({NEW_SPAN} == 'yes'))", False),
    # CEL's && and || absorb an error when the other side decides, whichever side errs.
    (f"({MISSING} == 1.0) || ({NEW_SPAN} == 1.0)", True),
    (f"({NEW_SPAN} == 0.0) && ({MISSING} == 1.0)", False),
    (f"({MISSING} == 1.0) && ({NEW_SPAN} == 0.0)", False),
])
def test_the_cel_tfx_writes(text, expected):
    assert _holds(text, _input(1.0)) is expected


@pytest.mark.parametrize("text", [
    f"inputs.artifacts['{SNAPSHOT_INPUT}'].artifacts[1].metadata['new_span'] == 1.0",
    f"{NEW_SPAN} < 'a'",
    NEW_SPAN,
    f"({MISSING} == 1.0) && ({NEW_SPAN} == 1.0)",
    f"({MISSING} == 1.0) || ({NEW_SPAN} == 0.0)",
])
def test_a_condition_that_errs_fails_the_task(text):
    with pytest.raises(condition.ConditionError):
        _holds(text, _input(1.0))


@pytest.mark.parametrize("text", ["size(inputs.artifacts) > 0", f"{NEW_SPAN} in [1.0]", f"{NEW_SPAN} ==",
                                  "inputs.artifacts[1.5] == 1"])
def test_what_is_not_the_cel_tfx_writes_is_refused_when_parsed_before_anything_runs(text):
    with pytest.raises(SpecError, match="field: CEL"):
        condition.parse(text, "field")


def _two_spans_in_the_bucket(tmp_path, rows: int, overrides: list[str] = ()):
    """configs/vertex.yaml on spans (window(2)), and two spans of penguins-like rows in its mapped bucket."""
    from pipeline.config import load_config, resolve
    from pipeline.dryrun.bucket import BucketMap
    from pipeline.local import span_data
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
    from components.data.snapshot import newness
    from components.serving.serving_dir import SAVED_MODEL
    from pipeline.config import DataSection, resolve
    from pipeline.dag.conditions import training_config_digest
    from pipeline.dryrun.run import dry_run
    from pipeline.runs.lineage import code_version
    from tests.conftest import tree_hashes

    config, bucket = _two_spans_in_the_bucket(tmp_path, rows=40)
    serving = bucket.local(config.pipeline.serving_dir)
    os.makedirs(f"{serving}/1")
    open(f"{serving}/1/{SAVED_MODEL}", "wb").close()
    statistics = tmp_path / "stats"
    (statistics / training_record.TRAIN_SPLIT).mkdir(parents=True)
    (statistics / training_record.TRAIN_SPLIT / training_record.STATISTICS_FILE).write_bytes(b"")
    # Trained on those spans with this config and schema: the key the run's Snapshot computes (newness.py).
    key = newness.training_key_of(training_config_digest(config, code_version()), resolve(DataSection().schema_file))
    training_record.write(serving, 1, str(statistics), "gs://elsewhere/model", spans=("span-1", "span-2"),
                          training_key=key)
    before = tree_hashes(Path(serving))

    out = io.StringIO()
    # One task runs: cheaper started fresh than after the fork server's preload, and it keeps that path covered.
    run = dry_run(config, tmp_path, stream=out, fresh_processes=True).runs[0]  # raises unless it ends succeeded
    assert "task processes: each started fresh (--fresh-processes)" in out.getvalue()
    # The DAG driver evaluates the group's condition; none of its tasks is created (driver/dag.go, argocompiler).
    assert [(t.name, t.state) for t in run.tasks] == _skipped_run("not triggered"), out.getvalue()
    assert f"{GROUP_TASK} not triggered: its triggerPolicy.condition is false" in out.getvalue()
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
    from pipeline.dryrun.run import dry_run

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

    assert [(t.name, t.state) for t in second.tasks] == _skipped_run("not triggered"), out.getvalue()
    assert second.summary.nothing_new and "span-2" in second.summary.nothing_new
    assert second.summary.pushed_version is None
