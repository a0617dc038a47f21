"""TFX's per-task trigger conditions, regrouped as the KFP SDK compiles `dsl.If`: one sub-DAG task.
Why and sources: docs/internals.md."""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any, Optional

from pipeline.errors import ConditionGroupError

TFX_DAG = "tfx-dag"  # tfx.orchestration.kubeflow.utils.TFX_DAG_NAME
GROUP_TASK = "condition-1"
GROUP_COMPONENT = "comp-condition-1"
_INPUT_REF = re.compile(r"inputs\.(artifacts|parameter_values|parameters)\['([^']+)'\]")


@dataclasses.dataclass(frozen=True)
class Decision:
    """The one condition the DAG may carry, in both its forms: TFX compiles the `Cond` into a test of the
    `prop` metadata of the producer's `artifact` output; the producer also writes the same decision as its
    integer value-artifact output `parameter`, which TFX's entrypoint writes as the task's output parameter
    when the component declares one (tfx/orchestration/kubeflow/v2/container/kubeflow_v2_run_executor.py,
    the outputs_parameters loop; TFX declares one itself for a value artifact a dynamic exec property reads,
    step_builder.py, build). The group task reads that parameter, as the KFP SDK compiles `dsl.If`."""
    producer: str
    artifact: str
    prop: str
    parameter: str

    def artifact_condition(self) -> str:
        """The grouped condition as TFX writes it (with the group's input names)."""
        return (f"(inputs.artifacts['{channel(self.producer, self.artifact)}'].artifacts[0]"
                f".metadata['{self.prop}'] == 1.0)")

    def parameter_condition(self) -> str:
        """The same test as the KFP SDK writes `dsl.If(task.output == 1)` for a NUMBER_INTEGER output."""
        return f"int(inputs.parameter_values['{channel(self.producer, self.parameter)}']) == 1"


def channel(producer: str, key: str) -> str:
    """The group input name for a producer's output, as the KFP SDK names pipeline channels."""
    return f"pipelinechannel--{producer}-{key}"


def task_dag(spec: dict[str, Any]) -> dict[str, Any]:
    """The DAG that holds the pipeline's tasks: the root's, or with an exit handler TFX's `tfx-dag` sub-DAG
    (tfx/orchestration/kubeflow/v2/pipeline_builder.py, build)."""
    wrapper = spec["components"].get(TFX_DAG)
    return wrapper["dag"] if wrapper and "dag" in wrapper else spec["root"]["dag"]


def group_conditions(spec: dict[str, Any], decision: Decision) -> bool:
    """Move the tasks that carry a trigger condition into one sub-DAG task, in place, its condition reading the
    decision's output parameter; a condition that is not the decision's is refused.

    Returns whether anything changed (a spec without conditions stays as it is).
    """
    tasks = task_dag(spec)["tasks"]
    members = {name for name, task in tasks.items() if task.get("triggerPolicy", {}).get("condition")}
    if not members:
        return False
    if GROUP_TASK in tasks or GROUP_COMPONENT in spec["components"]:
        raise ConditionGroupError(f"pipelineSpec: {GROUP_TASK!r} is already taken; cannot group the conditions")
    conditions = {name: _outside_condition(name, tasks[name], members) for name in members}
    if len(set(conditions.values())) != 1:
        raise ConditionGroupError("pipelineSpec: the conditioned tasks differ in their condition "
                                  f"({sorted(set(conditions.values()))}); one group per condition is not built")
    for name, task in tasks.items():
        if name not in members:
            for ref in _task_refs(task):
                if ref[1] in members:
                    raise ConditionGroupError(f"pipelineSpec: task {name} reads {ref[1]}'s output from "
                                              "inside the condition group; a group with outputs is not built")

    group_inputs: dict[str, dict[str, dict]] = {"artifacts": {}, "parameters": {}}
    task_inputs: dict[str, dict[str, dict]] = {"artifacts": {}, "parameters": {}}
    children = {}
    for name in sorted(members):
        child = copy.deepcopy(tasks[name])
        del child["triggerPolicy"]["condition"]
        if not child["triggerPolicy"]:
            del child["triggerPolicy"]
        for kind, inputs in child.get("inputs", {}).items():
            for key, source in inputs.items():
                outside = _outside_source(spec, tasks, source, kind, members)
                if outside is None:
                    continue
                input_name, task_source, definition = outside
                group_inputs[kind][input_name] = definition
                task_inputs[kind][input_name] = task_source
                inputs[key] = {("componentInputArtifact" if kind == "artifacts"
                                else "componentInputParameter"): input_name}
        child["dependentTasks"] = sorted(d for d in child.get("dependentTasks", []) if d in members)
        if not child["dependentTasks"]:
            del child["dependentTasks"]
        children[name] = child

    outside_deps = sorted({d for name in members for d in tasks[name].get("dependentTasks", []) if d not in members})
    spec["components"][GROUP_COMPONENT] = {
        "dag": {"tasks": children},
        "inputDefinitions": {k: v for k, v in group_inputs.items() if v}}
    group_task = {
        "taskInfo": {"name": GROUP_TASK},
        "componentRef": {"name": GROUP_COMPONENT},
        "inputs": {k: v for k, v in task_inputs.items() if v},
        "triggerPolicy": {"condition": next(iter(conditions.values()))},
    }
    if outside_deps:
        group_task["dependentTasks"] = outside_deps
    for name in members:
        del tasks[name]
    tasks[GROUP_TASK] = group_task
    _read_decision_parameter(spec, tasks, decision)
    return True


def _read_decision_parameter(spec: dict[str, Any], tasks: dict[str, Any], decision: Decision) -> None:
    """The group task's condition rewritten from TFX's artifact form into the SDK's parameter form: the producer
    declares its decision as an output parameter, the group takes it as an input and tests it."""
    group = tasks[GROUP_TASK]
    found = group["triggerPolicy"]["condition"]
    if found != decision.artifact_condition():
        raise ConditionGroupError(
            f"pipelineSpec: the grouped condition {found!r} is not the DAG's decision "
            f"({decision.artifact_condition()!r}); only that one is rewritten into the parameter form the KFP SDK "
            "compiles dsl.If into, and no precedent was found for an artifact condition on a DAG task")
    producer = tasks.get(decision.producer)
    component = spec["components"].get(producer["componentRef"]["name"], {}) if producer else {}
    if decision.parameter not in component.get("outputDefinitions", {}).get("artifacts", {}):
        raise ConditionGroupError(f"pipelineSpec: task {decision.producer!r} has no output {decision.parameter!r} "
                                  "(an integer value artifact) to declare as its output parameter")
    component["outputDefinitions"].setdefault("parameters", {})[decision.parameter] = {
        "parameterType": "NUMBER_INTEGER"}
    name = channel(decision.producer, decision.parameter)
    group.setdefault("inputs", {}).setdefault("parameters", {})[name] = {
        "taskOutputParameter": {"producerTask": decision.producer, "outputParameterKey": decision.parameter}}
    # Input definitions in the schema's own typing: pipeline spec 2.1 types parameters as the SDK does,
    # TFX's 2.0.0 spec (Vertex) with the legacy `type` (compiler_utils.build_parameter_type_spec_legacy).
    typed = {"parameterType": "NUMBER_INTEGER"} if spec.get("schemaVersion") == "2.1.0" else {"type": "INT"}
    spec["components"][GROUP_COMPONENT].setdefault("inputDefinitions", {}).setdefault("parameters", {})[name] = typed
    group["triggerPolicy"]["condition"] = decision.parameter_condition()


def _task_refs(task: dict) -> list[tuple[str, str]]:
    """(kind, producer) for each upstream output the task reads."""
    refs = []
    for kind, inputs in task.get("inputs", {}).items():
        for source in inputs.values():
            for field in ("taskOutputArtifact", "taskOutputParameter"):
                if field in source:
                    refs.append((kind, source[field]["producerTask"]))
    return refs


def _outside_source(spec: dict, tasks: dict, source: dict, kind: str,
                    members: set[str]) -> Optional[tuple[str, dict, dict]]:
    """For an input read from outside the group: (the group input it becomes, the group task's source for it,
    its input definition); None for inputs from inside the group or constants."""
    for field, key_field, output_kind in (("taskOutputArtifact", "outputArtifactKey", "artifacts"),
                                          ("taskOutputParameter", "outputParameterKey", "parameters")):
        if field in source:
            producer, key = source[field]["producerTask"], source[field][key_field]
            if producer in members:
                return None
            return (channel(producer, key), {field: dict(source[field])},
                    _output_definition(spec, tasks, producer, output_kind, key))
    for field in ("componentInputParameter", "componentInputArtifact"):
        if field in source:
            name = source[field]
            return name, {field: name}, spec["root"].get("inputDefinitions", {}).get(kind, {}).get(name, {})
    return None


def _output_definition(spec: dict, tasks: dict, producer: str, kind: str, key: str) -> dict:
    task = tasks.get(producer)
    component = spec["components"].get(task["componentRef"]["name"], {}) if task else {}
    definition = component.get("outputDefinitions", {}).get(kind, {}).get(key)
    if definition is None:
        raise ConditionGroupError(f"pipelineSpec: task {producer!r} declares no output {kind} {key!r}")
    return copy.deepcopy(definition)


def _outside_condition(name: str, task: dict, members: set[str]) -> str:
    """The task's condition with each input it names spelled as the group input it becomes."""
    inputs = task.get("inputs", {})

    def rename(match: re.Match) -> str:
        kind, key = ("artifacts" if match[1] == "artifacts" else "parameters"), match[2]
        source = inputs.get(kind, {}).get(key)
        ref = (source or {}).get("taskOutputArtifact") or (source or {}).get("taskOutputParameter")
        if ref is None or ref["producerTask"] in members:
            raise ConditionGroupError(f"pipelineSpec: task {name}: triggerPolicy.condition: {match[0]} is not "
                                      "an output of a task outside the condition")
        out_key = ref.get("outputArtifactKey") or ref.get("outputParameterKey")
        return f"inputs.{match[1]}['{channel(ref['producerTask'], out_key)}']"

    return _INPUT_REF.sub(rename, task["triggerPolicy"]["condition"])
