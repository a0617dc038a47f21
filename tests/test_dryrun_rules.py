"""The spec rules the backend applies (pipeline/spec/rules.py), each broken in a real compiled spec.

Every shipped variant compiles to a spec that keeps every rule; each rule,
broken in that spec, makes `dryrun --spec` fail before any task runs, with
an error naming the rule, the task and the field. The dry runs here stop at
the rules, so they cost a job build each, not a pipeline run.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from pipeline.errors import SpecError
from pipeline.spec import model, rules
from pipeline.spec.backends import VERTEX
from pipeline.spec.condition_group import GROUP_COMPONENT, GROUP_TASK, TFX_DAG
from tests.vertex_support import compiled_template, vertex_config

SPANS = ("data.spans=window(2)", "trainer.warm_start=true")
VARIANTS = [(), SPANS, ("data.spans=window(2)", "data.analyzer_cache=true")]


@pytest.mark.parametrize("overrides", VARIANTS, ids=["flat", "spans-warm-start", "analyzer-cache"])
def test_every_shipped_variant_keeps_every_rule(overrides):
    job = json.loads(compiled_template(*overrides).read_text())
    pipeline = model.read(job["pipelineSpec"])
    assert rules.check(pipeline, VERTEX) == []
    tasks = list(pipeline.tasks())
    # The rule in so many words: producers are tasks of their DAG, their outputs declared, no resolver.
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            assert set(task.producers().values()) <= set(dag.tasks), task.name
    assert not [t.name for t in tasks if t.kind in ("resolver", "importer")]
    assert not [t.name for t in tasks if t.container.get("lifecycle")]
    # The run lease: taken first, released by the exit handler after everything else (pipeline/dag/run_lease.py).
    root = pipeline.root.tasks
    assert set(root) == {TFX_DAG, "ReleaseRunLease"}
    assert root["ReleaseRunLease"].spec["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    assert root["ReleaseRunLease"].spec["dependentTasks"] == [TFX_DAG]
    inner = pipeline.sub_dag(root[TFX_DAG]).tasks
    assert [n for n, t in inner.items() if not t.upstream] == ["RunLease"]


@pytest.fixture(scope="module")
def compiled() -> dict:
    return json.loads(compiled_template(*SPANS).read_text())


def _children(job: dict) -> dict:
    return job["pipelineSpec"]["components"][GROUP_COMPONENT]["dag"]["tasks"]


def _executor(job: dict, task: dict) -> dict:
    label = job["pipelineSpec"]["components"][task["componentRef"]["name"]]["executorLabel"]
    return job["pipelineSpec"]["deploymentSpec"]["executors"][label]


def _dry_run_refuses(tmp_path: Path, job: dict) -> str:
    from pipeline.dryrun.run import dry_run

    path = tmp_path / "broken.json"
    path.write_text(json.dumps(job))
    out = io.StringIO()
    with pytest.raises(SpecError) as e:
        dry_run(vertex_config(*SPANS), tmp_path / "dry", stream=out, template=path)
    assert "> " not in out.getvalue() and "dry run of" not in out.getvalue()  # refused before anything ran
    return str(e.value)


def _rename_producer(job):
    examples = _children(job)["Trainer"]["inputs"]["artifacts"]["examples"]
    examples["taskOutputArtifact"]["producerTask"] = "Transform_task"


def _undeclared_output(job):
    blessing = _children(job)["Pusher"]["inputs"]["artifacts"]["model_blessing"]
    blessing["taskOutputArtifact"]["outputArtifactKey"] = "bless"


def _missing_parent_input(job):
    artifacts = _children(job)["CsvExampleGen"]["inputs"]["artifacts"]
    key = next(k for k, source in artifacts.items() if "componentInputArtifact" in source)
    artifacts[key] = {"componentInputArtifact": "nope"}


def _missing_component(job):
    _children(job)["Evaluator"]["componentRef"]["name"] = "comp-missing"


def _missing_executor(job):
    job["pipelineSpec"]["components"]["Evaluator"]["executorLabel"] = "Evaluator_gone"


def _resolver_executor(job):
    _executor(job, _children(job)["Evaluator"]).clear()
    _executor(job, _children(job)["Evaluator"])["resolver"] = {"outputArtifactQueries": {}}


def _unknown_dependency(job):
    _children(job)["Trainer"]["dependentTasks"].append("Tuner")


def _cycle(job):
    _children(job)["CsvExampleGen"]["dependentTasks"] = ["Pusher"]


def _exit_handler_strategy(job):
    _children(job)["Pusher"]["triggerPolicy"] = {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}


def _tasks(job):
    return job["pipelineSpec"]["components"][TFX_DAG]["dag"]["tasks"]


def _exit_task_downstream(job):
    _tasks(job)["RunLease"].setdefault("dependentTasks", []).append("ReleaseRunLease")
    job["pipelineSpec"]["root"]["dag"]["tasks"]["Extra"] = {
        **copy.deepcopy(job["pipelineSpec"]["root"]["dag"]["tasks"][TFX_DAG]), "dependentTasks": ["ReleaseRunLease"]}


def _final_status_elsewhere(job):
    release = job["pipelineSpec"]["root"]["dag"]["tasks"]["ReleaseRunLease"]
    release["inputs"]["parameters"]["final_status"]["taskFinalStatus"]["producerTask"] = "RunLease"


def _unknown_runtime_placeholder(job):
    owner = _tasks(job)["RunLease"]["inputs"]["parameters"]["owner"]["runtimeValue"]
    owner["constantValue"]["stringValue"] = "run-{{$.pipeline_job_name}}"


def _unknown_strategy(job):
    _children(job)["Pusher"]["triggerPolicy"] = {"strategy": "TRIGGER_STRATEGY_NEW"}


def _unknown_cel(job):
    _tasks(job)[GROUP_TASK]["triggerPolicy"]["condition"] = "size(inputs.artifacts) > 0"


def _condition_on_missing_input(job):
    task = _tasks(job)[GROUP_TASK]
    task["triggerPolicy"]["condition"] = "inputs.artifacts['model'].artifacts[0].metadata['new_span'] == 1.0"


def _artifact_condition_on_the_group(job):
    """The group's condition as TFX writes it on a container task: reading artifact metadata, a form no backend
    is known to evaluate on a DAG task (the SDK's dsl.If reads parameters)."""
    _tasks(job)[GROUP_TASK]["triggerPolicy"]["condition"] = \
        "(inputs.artifacts['pipelinechannel--Snapshot-snapshot'].artifacts[0].metadata['new_span'] == 1.0)"


def _placeholder(job):
    _executor(job, _children(job)["ImportSchemaGen"])["container"]["args"].append(
        "--schema={{$.inputs.parameters['no_such_input']}}")


def _executor_class(job):
    args = _executor(job, _children(job)["Transform"])["container"]["args"]
    args[args.index("--executor_class_path") + 1] = "components.transform.NoSuchExecutor"


def _artifact_type(job):
    definitions = job["pipelineSpec"]["components"]["Pusher"]["outputDefinitions"]["artifacts"]
    next(iter(definitions.values()))["artifactType"] = {"schemaTitle": "components.NoSuchArtifact"}


def _task_field(job):
    _children(job)["Transform"]["iteratorPolicy"] = {"parallelismLimit": 2}


BROKEN = [
    ("producer-in-dag", _rename_producer, "Trainer.inputs.artifacts.examples.taskOutputArtifact.producerTask: "
     "'Transform_task' is not a task of this DAG"),
    ("output-declared", _undeclared_output, "declares no output artifact 'bless'"),
    ("input-declared", _missing_parent_input, "the enclosing DAG comp-condition-1 has no input artifact 'nope'"),
    ("component-exists", _missing_component, "no component 'comp-missing'"),
    ("executor-exists", _missing_executor, "no executor 'Evaluator_gone'"),
    ("executor-kind", _resolver_executor, "task Evaluator: pipelineSpec.deploymentSpec.executors."),
    ("dependency-in-dag", _unknown_dependency, "'Tuner' is not a task of this DAG"),
    ("acyclic", _cycle, "in a cycle"),
    ("exit-task", _exit_handler_strategy, "Pusher.triggerPolicy.strategy: ALL_UPSTREAM_TASKS_COMPLETED"),
    ("exit-task", _exit_task_downstream, "Extra depend on it"),
    ("trigger-policy", _unknown_strategy, "TRIGGER_STRATEGY_NEW"),
    ("final-status", _final_status_elsewhere, "the backend reports the final status of the first dependent task "
     "(tfx-dag)"),
    ("runtime-value", _unknown_runtime_placeholder, "'run-{{$.pipeline_job_name}}'"),
    ("condition", _unknown_cel, "unknown variable 'size'"),
    ("condition", _condition_on_missing_input, "the task has no input artifact 'model'"),
    ("dag-condition", _artifact_condition_on_the_group, "a DAG task's condition reads only inputs.parameter_values"),
    ("placeholders", _placeholder, "{{$.inputs.parameters['no_such_input']}} names 'no_such_input'"),
    ("container", _executor_class, "--executor_class_path 'components.transform.NoSuchExecutor' does not import"),
    ("artifact-types", _artifact_type, "'components.NoSuchArtifact' does not import"),
    ("task-fields", _task_field, "Transform.iteratorPolicy: not emulated"),
]


@pytest.mark.parametrize("rule, change, expected", BROKEN, ids=[f"{r}-{c.__name__}" for r, c, _ in BROKEN])
def test_a_broken_rule_fails_the_dry_run_naming_the_task_and_the_field(tmp_path, compiled, rule, change, expected):
    job = copy.deepcopy(compiled)
    change(job)
    message = _dry_run_refuses(tmp_path, job)
    assert f"[{rule}]" in message and expected in message, message


def test_every_rule_is_tested_here():
    # The platform spec's rules, Kubeflow's alone: tests/test_dryrun_kubeflow.py breaks them in its package.
    kubeflow_only = {"platform-spec", "pod-labels"}
    assert {r.id for r in rules.RULES} == {rule for rule, _, _ in BROKEN} | kubeflow_only


def test_all_broken_rules_are_reported_at_once(tmp_path, compiled):
    job = copy.deepcopy(compiled)
    _rename_producer(job)
    _placeholder(job)
    message = _dry_run_refuses(tmp_path, job)
    assert "breaks 2 rule(s)" in message and "[producer-in-dag]" in message and "[placeholders]" in message


def test_a_spec_file_that_is_not_there_is_a_config_error(tmp_path):
    from pipeline.dryrun.run import dry_run
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="--spec .*no such file"):
        dry_run(vertex_config(), tmp_path, template=tmp_path / "missing.json")
