"""The driver's half of a task, as the KFP backend's driver does it: inputs, condition, pre-cache hook, cache.
Why and sources: docs/internals.md."""

from __future__ import annotations

import copy
import dataclasses
import json
import uuid
from typing import Any

from google.protobuf import json_format
from kfp.local import executor_input_utils, executor_output_utils
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from pipeline.spec import condition
from pipeline.spec.backends import Backend
from pipeline.spec.model import (
    FINAL_STATUS,
    PARENT_ARTIFACT,
    PARENT_PARAMETER,
    RUN_PLACEHOLDERS,
    UPSTREAM_ARTIFACT,
    UPSTREAM_PARAMETER,
    Job,
    SpecError,
    Task,
)

_LEGACY_VALUE = {pb.PrimitiveType.INT: ("int_value", int), pb.PrimitiveType.DOUBLE: ("double_value", float),
                 pb.PrimitiveType.STRING: ("string_value", lambda v: v if isinstance(v, str) else json.dumps(v))}


@dataclasses.dataclass
class TaskOutputs:
    """What a task produced, in the backend's terms (gs:// URIs): RuntimeArtifact JSON per output key,
    parameter values."""
    artifacts: dict[str, list[dict[str, Any]]]
    parameters: dict[str, Any]


@dataclasses.dataclass
class Scope:
    """What the tasks of one DAG read: the outputs of its tasks that succeeded, and the DAG's own inputs."""
    outputs: dict[str, TaskOutputs]
    parameters: dict[str, Any]                     # the enclosing DAG task's resolved input parameters
    artifacts: dict[str, list[dict[str, Any]]]     # and its input artifacts
    run: dict[str, str] = dataclasses.field(default_factory=dict)  # the run's placeholder values
    states: dict[str, str] = dataclasses.field(default_factory=dict)  # task -> final state, for taskFinalStatus

    def inner(self, parameters: dict[str, Any], artifacts: dict[str, list[dict[str, Any]]]) -> "Scope":
        """The scope of a sub-DAG of this one: its own inputs, the same run."""
        return Scope({}, parameters, artifacts, self.run)


def run_placeholders(job: Job, backend: Backend, resource_prefix: str) -> dict[str, str]:
    """What the backend puts for each run placeholder: on Kubeflow the run's display name, name and id
    (driver.go, Options); on Vertex the PipelineJob's id, resource name and a uuid."""
    job_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, job.job_id))
    if backend.name == "vertex":
        location = resource_prefix.split("/metadataStores/")[0]
        return dict(zip(RUN_PLACEHOLDERS, (job.job_id, f"{location}/pipelineJobs/{job.job_id}", job_uuid)))
    return dict(zip(RUN_PLACEHOLDERS, (job.job_id, f"run-{job_uuid}", job_uuid)))


def root_scope(job: Job, run: dict[str, str] | None = None) -> Scope:
    """The root DAG's inputs: the job's runtime parameters, or the spec's defaults."""
    parameters = {}
    for name, definition in job.spec["root"].get("inputDefinitions", {}).get("parameters", {}).items():
        if name in job.runtime.get("parameterValues", {}):
            parameters[name] = job.runtime["parameterValues"][name]
        elif "defaultValue" in definition:
            parameters[name] = definition["defaultValue"]
    return Scope({}, parameters, {}, dict(run or {}))


def resolve_inputs(task: Task, scope: Scope) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """(parameter values, input artifacts) of the task, as resolveInputs builds them."""
    parameters = {}
    for key, source in task.inputs("parameters").items():
        field = task.field("inputs.parameters", key)
        if "runtimeValue" in source:
            value = _constant(source["runtimeValue"], field)
            parameters[key] = scope.run.get(value, value) if isinstance(value, str) else value
        elif FINAL_STATUS in source:
            parameters[key] = final_status(task, scope)
        elif UPSTREAM_PARAMETER in source:
            ref = source[UPSTREAM_PARAMETER]
            produced = scope.outputs[ref["producerTask"]].parameters
            if ref["outputParameterKey"] not in produced:
                raise SpecError(f"{field}.{UPSTREAM_PARAMETER}: task {ref['producerTask']} produced no output "
                                f"parameter {ref['outputParameterKey']!r} (it has {sorted(produced)})")
            parameters[key] = produced[ref["outputParameterKey"]]
        elif source[PARENT_PARAMETER] in scope.parameters:
            parameters[key] = scope.parameters[source[PARENT_PARAMETER]]
        else:
            raise SpecError(f"{field}.{PARENT_PARAMETER}: the enclosing DAG has no value for "
                            f"{source[PARENT_PARAMETER]!r} (runtimeConfig or default)")
    artifacts = {}
    for key, source in task.inputs("artifacts").items():
        if UPSTREAM_ARTIFACT in source:
            ref = source[UPSTREAM_ARTIFACT]
            artifacts[key] = scope.outputs[ref["producerTask"]].artifacts[ref["outputArtifactKey"]]
        else:
            artifacts[key] = scope.artifacts[source[PARENT_ARTIFACT]]
    return parameters, artifacts


def final_status(task: Task, scope: Scope) -> str:
    """An exit task's PipelineTaskFinalStatus input, as JSON text (a STRING input gets a struct as JSON text,
    resolve.go, handleParamTypeValidationAndConversion). Its producer is the task's first dependent task
    whatever producerTask says (resolve.go, resolveInputParameter, TaskFinalStatus); rules.py refuses a spec
    where the two differ."""
    producer = task.spec["dependentTasks"][0]
    return json.dumps({"state": scope.states[producer], "pipelineTaskName": producer,
                       "pipelineJobResourceName": scope.run.get("{{$.pipeline_job_resource_name}}", ""),
                       "error": {}})


def _constant(runtime_value: dict, field: str) -> Any:
    if "constant" in runtime_value:
        return runtime_value["constant"]
    value = runtime_value.get("constantValue", {})
    for name, convert in (("intValue", int), ("doubleValue", float), ("stringValue", str)):
        if name in value:
            return convert(value[name])
    raise SpecError(f"{field}.runtimeValue: no constant value the dry run understands ({runtime_value})")


def dag_input(parameters: dict[str, Any], artifacts: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A DAG task's ExecutorInput: inputs only (driver/dag.go provisions no outputs)."""
    return {"inputs": {"parameterValues": parameters,
                       "artifacts": {k: {"artifacts": v} for k, v in artifacts.items()}}}


def container_input(task: Task, parameters: dict[str, Any], artifacts: dict[str, list[dict[str, Any]]],
                    task_root: str, resource_prefix: str, backend: Backend) -> dict[str, Any]:
    """The ExecutorInput (as JSON) the backend hands the task's container, in gs:// terms: input artifacts
    typed or not and the launcher's own outputs as the backend makes them (backend.py)."""
    spec = component_spec(task)
    without_artifacts = copy.deepcopy(spec)
    without_artifacts.input_definitions.ClearField("artifacts")
    message = executor_input_utils.construct_executor_input(without_artifacts, parameters, task_root)
    for key, definition in spec.input_definitions.parameters.items():
        if definition.type in _LEGACY_VALUE and key in parameters:
            field, convert = _LEGACY_VALUE[definition.type]
            try:
                setattr(message.inputs.parameters[key], field, convert(parameters[key]))
            except (TypeError, ValueError):
                raise SpecError(f"{task.field('inputs.parameters', key)}: {parameters[key]!r} is not a "
                                f"{pb.PrimitiveType.PrimitiveTypeEnum.Name(definition.type)}") from None
    for key, items in artifacts.items():
        json_format.ParseDict({"artifacts": items}, message.inputs.artifacts[key])
        if not backend.types_input_artifacts:
            for artifact in message.inputs.artifacts[key].artifacts:
                artifact.type.instance_schema = ""
    for key, artifact_type in backend.launcher_outputs.items():
        json_format.ParseDict({"type": artifact_type, "uri": f"{task_root}/{key}"},
                              message.outputs.artifacts[key].artifacts.add())
    for artifact_list in message.outputs.artifacts.values():
        for artifact in artifact_list.artifacts:
            artifact.name = f"{resource_prefix}/artifacts/{uuid.uuid4().hex}"
    return executor_input_utils.executor_input_to_dict(message, spec)


def component_spec(task: Task) -> pb.ComponentSpec:
    return json_format.ParseDict(task.component, pb.ComponentSpec(), ignore_unknown_fields=False)


def triggers(task: Task, executor_input: dict[str, Any]) -> bool:
    """The task's condition on its resolved inputs; True without one. ConditionError: the driver fails."""
    if not task.condition:
        return True
    field = task.field("triggerPolicy.condition")
    return condition.evaluate(condition.parse(task.condition, field), executor_input, field)


def pre_cache_updates(local_input: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict]]:
    """What a pre-cache-check hook wrote (parameter values, output artifact metadata); Vertex applies them
    to the task before the cache lookup. The file stays where TFX's entrypoint reads it again."""
    written = executor_output_utils.load_executor_output(local_input["outputs"]["outputFile"])
    as_dict = json_format.MessageToDict(written)
    parameters = {k: executor_output_utils.pb2_value_to_python(v) for k, v in written.parameter_values.items()}
    metadata = {k: v["artifacts"][0].get("metadata", {}) for k, v in as_dict.get("artifacts", {}).items()
                if v.get("artifacts")}
    return parameters, metadata


def apply_pre_cache_updates(executor_input: dict[str, Any], updates: tuple[dict[str, Any], dict[str, dict]]
                            ) -> None:
    parameters, metadata = updates
    executor_input["inputs"].setdefault("parameterValues", {}).update(parameters)
    for key, values in metadata.items():
        for artifact in executor_input["outputs"]["artifacts"].get(key, {}).get("artifacts", []):
            artifact.setdefault("metadata", {}).update(values)

