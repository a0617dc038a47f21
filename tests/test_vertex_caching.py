"""Vertex's cache against the compiled spec: new data reaches every scheduled run,
unchanged data reuses what is safe, and no task that reads mutable state is ever cached.

The runs are modelled by tests/vertex_cache_sim.py on cache_rule's key, which
tests/test_cache_rule.py holds to the KFP backend's own fingerprints.
"""

from __future__ import annotations

import copy
import json

import pytest

from pipeline.spec import cache_rule
from tests.vertex_cache_sim import World
from tests.vertex_support import compiled_template, pipeline_tasks

# Every task that reads Examples, directly or through the schema, after the snapshot.
READERS = ["CsvExampleGen", "StatisticsGen", "ExampleValidator", "DataGate", "Transform", "Trainer", "Evaluator",
           "Pusher"]
PENGUINS_V1 = "species,island\nAdelie,Torgersen\n"
PENGUINS_V2 = PENGUINS_V1 + "Gentoo,Biscoe\n"


@pytest.fixture(scope="module")
def job() -> dict:
    return json.loads(compiled_template().read_text())


def test_the_rule_finds_every_mutable_reader_and_never_caches_it(job):
    spec = job["pipelineSpec"]
    tasks = dict(cache_rule.dag_tasks(spec))
    never = {name for name, task in tasks.items() if cache_rule.never_cached(spec, task)}
    # The readers of mutable state, and the run lease's two tasks (a hit would skip taking or releasing it).
    assert never == {"Snapshot", "ImportSchemaGen", "DriftGate", "ServingModel", "RunLease", "ReleaseRunLease"}
    for name in never:
        assert tasks[name]["cachingOptions"] == {"enableCache": False}, name
    # The rest is cached (configs/vertex.yaml: pipeline.enable_cache: true).
    assert all(cache_rule.caching_enabled(t) for n, t in tasks.items() if n not in never)


def test_pipeline_enable_cache_false_turns_every_task_off(job):
    spec = copy.deepcopy(job["pipelineSpec"])
    cache_rule.apply(spec, enable_cache=False)
    assert not any(cache_rule.caching_enabled(t) for _, t in cache_rule.dag_tasks(spec))


def test_new_data_reaches_the_next_run(job):
    world = World(source=PENGUINS_V1)
    first = world.run(job)
    world.source = PENGUINS_V2  # new rows land in data.input_dir between scheduled runs
    second = world.run(job)

    assert not second["Snapshot"].hit and not second["ImportSchemaGen"].hit
    assert second["Snapshot"].output_parameters == {"new_data": 1}
    # ExampleGen read run 2's snapshot, which holds the new data.
    data_dirs = [world.snapshots[run["Snapshot"].outputs["snapshot"][0]] for run in (first, second)]
    assert data_dirs[0] != data_dirs[1]
    assert second["CsvExampleGen"].inputs["snapshot"] == second["Snapshot"].outputs["snapshot"]
    for task in READERS:
        assert not second[task].hit, f"{task} was served from the cache after the data changed"
    # The model trained in run 2 is trained on run 2's examples.
    examples = second["CsvExampleGen"].outputs["examples"]
    assert second["Transform"].inputs["examples"] == examples
    assert second["Trainer"].inputs["examples"] == second["Transform"].outputs["transformed_examples"]
    # The baseline is the model serving now: none on the first run, run 1's pushed model on the second.
    for run, serving in ((first, None), (second, first["Trainer"].outputs["model"][0])):
        assert not run["ServingModel"].hit
        assert run["Evaluator"].inputs["baseline_model"] == run["ServingModel"].outputs["model"]
        assert world.copies[run["ServingModel"].outputs["model"][0]] == serving


def test_unchanged_data_skips_everything_after_the_snapshot(job):
    """Every task after the Snapshot reads its new artifact, so none of them would be a cache hit (Vertex keys
    on input artifact ids); the condition saves them: the Snapshot says nothing is new and the group is not
    triggered, so no Trainer CustomJob, no Dataflow job, no push."""
    world = World(source=PENGUINS_V1)
    first = world.run(job)
    again = world.run(job)
    assert not again["Snapshot"].hit and again["Snapshot"].outputs != first["Snapshot"].outputs
    assert world.snapshots[again["Snapshot"].outputs["snapshot"][0]] == \
        world.snapshots[first["Snapshot"].outputs["snapshot"][0]]
    assert again["Snapshot"].output_parameters == {"new_data": 0}
    assert set(again) == {"RunLease", "Snapshot", "condition-1", "tfx-dag", "ReleaseRunLease"}, set(again)
    assert world.serving == first["Trainer"].outputs["model"][0]


def test_a_run_level_override_would_reuse_the_old_snapshot(job):
    """Why submit and schedule pass enable_caching=None: aiplatform's True sets every task's option."""
    from google.cloud.aiplatform.pipeline_jobs import _set_enable_caching_value

    overridden = copy.deepcopy(job)
    _set_enable_caching_value(overridden["pipelineSpec"], True)
    world = World(source=PENGUINS_V1)
    world.run(overridden)
    world.source = PENGUINS_V2
    stale = world.run(overridden)
    assert stale["Snapshot"].hit and stale["CsvExampleGen"].hit and stale["Trainer"].hit
    # The ServingModel's only input is the serving dir's path: once cached it returns the first run's
    # "nothing serving" forever, although run 1 pushed a model.
    assert stale["ServingModel"].hit and world.copies[stale["ServingModel"].outputs["model"][0]] is None
    assert world.serving is not None


def test_the_drift_gate_finds_its_baseline_at_run_time_and_is_never_cached(job):
    """No baseline is baked into the spec: the gate gets the serving dir and reads the record of what
    serves when it runs; the Pusher gets the statistics and snapshot it writes that record from."""
    from tests.vertex_support import vertex_config

    spec = job["pipelineSpec"]
    tasks = pipeline_tasks(spec)
    gate = tasks["DriftGate"]
    parameters = {k: v["runtimeValue"]["constantValue"]["stringValue"] for k, v in gate["inputs"]["parameters"].items()}
    assert parameters["serving_dir"] == vertex_config().pipeline.serving_dir
    assert not {"baseline_statistics", "serving_version"} & set(parameters), parameters
    assert not any("pipeline_root" in value or "Split-train" in value for value in parameters.values()), parameters
    assert gate["cachingOptions"] == {"enableCache": False}
    assert "serving_dir" in cache_rule.never_cached(spec, gate)
    pusher = tasks["Pusher"]["inputs"]["artifacts"]
    assert pusher["statistics"]["taskOutputArtifact"] == {"outputArtifactKey": "statistics",
                                                          "producerTask": "StatisticsGen"}
    # The snapshot comes in through the condition group's input (pipeline/spec/condition_group.py).
    assert pusher["snapshot"] == {"componentInputArtifact": "pipelinechannel--Snapshot-snapshot"}
    assert tasks["condition-1"]["inputs"]["artifacts"]["pipelinechannel--Snapshot-snapshot"][
        "taskOutputArtifact"] == {"outputArtifactKey": "snapshot", "producerTask": "Snapshot"}
