"""One task's ExecutorInput, command line and outputs, built with kfp.local's own code.

kfp.local (kfp 2.5) builds the parameters and output artifacts
(executor_input_utils), resolves `{{$...}}` placeholders (placeholder_utils)
and reads ExecutorOutput (executor_output_utils) the way the KFP launcher does.
What it leaves out is added here, as the Vertex backend fills it:
- input artifacts ("not yet supported for local execution"): the producer's
  RuntimeArtifacts (name, type, uri, metadata) from its ExecutorOutput;
- the legacy `inputs.parameters` (typed Value by the component's `type`),
  which TFX's entrypoint reads for schemaVersion 2.0.0 specs;
- a Vertex-style resource name for every output artifact (TFX's entrypoint
  turns artifact names into the ids the Evaluator writes into a blessing).
kfp.local resolves a placeholder with no value to "null"; here that is an
error naming the task and the field.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import sys
from typing import Any, Callable

from google.protobuf import json_format
from kfp import dsl
from kfp.local import executor_input_utils, executor_output_utils, placeholder_utils
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from pipeline.vertex.dryrun.spec import ENTRYPOINT_FLAGS, PYTHON, Job, SpecError, Task

_PLACEHOLDER = re.compile(r"\{\{\$\.(.*?)\}\}")
# Resolved by kfp.local without looking into the ExecutorInput.
_CONSTANT_PLACEHOLDERS = {"{{$.outputs.output_file}}", "{{$.outputMetadataUri}}", dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
                          dsl.PIPELINE_JOB_ID_PLACEHOLDER, dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
                          dsl.PIPELINE_TASK_ID_PLACEHOLDER, dsl.PIPELINE_ROOT_PLACEHOLDER}
_LEGACY_VALUE = {pb.PrimitiveType.INT: ("int_value", int), pb.PrimitiveType.DOUBLE: ("double_value", float),
                 pb.PrimitiveType.STRING: ("string_value", lambda v: v if isinstance(v, str) else json.dumps(v))}


@dataclasses.dataclass
class TaskOutputs:
    """What a task produced, in Vertex's terms (gs:// URIs): RuntimeArtifact JSON per output key, parameter values."""
    artifacts: dict[str, list[dict[str, Any]]]
    parameters: dict[str, Any]


def component_spec(task: Task) -> pb.ComponentSpec:
    return json_format.ParseDict(task.component, pb.ComponentSpec(), ignore_unknown_fields=False)


def arguments(task: Task, job: Job, outputs: dict[str, TaskOutputs], producer: Callable[[str, str], str]) -> dict:
    """The value of every input parameter, from constants, upstream outputs or the job's runtime config."""
    result = {}
    for key, source in task.spec.get("inputs", {}).get("parameters", {}).items():
        field = task.field("inputs.parameters", key)
        if "runtimeValue" in source:
            result[key] = _constant(source["runtimeValue"], field)
        elif "taskOutputParameter" in source:
            ref = source["taskOutputParameter"]
            name = producer(ref["producerTask"], f"{field}.taskOutputParameter.producerTask")
            produced = outputs[name].parameters
            if ref["outputParameterKey"] not in produced:
                raise SpecError(f"{field}.taskOutputParameter: task {name} produced no output parameter "
                                f"{ref['outputParameterKey']!r} (it has {sorted(produced)})")
            result[key] = produced[ref["outputParameterKey"]]
        else:
            name = source["componentInputParameter"]
            result[key] = _pipeline_parameter(job, name, f"{field}.componentInputParameter")
    return result


def _constant(runtime_value: dict, field: str) -> Any:
    if "constant" in runtime_value:
        return runtime_value["constant"]
    value = runtime_value.get("constantValue", {})
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "stringValue" in value:
        return value["stringValue"]
    raise SpecError(f"{field}.runtimeValue: no constant value the dry run understands ({runtime_value})")


def _pipeline_parameter(job: Job, name: str, field: str) -> Any:
    if name in job.runtime.get("parameterValues", {}):
        return job.runtime["parameterValues"][name]
    if name in job.runtime.get("parameters", {}):
        return _constant({"constantValue": job.runtime["parameters"][name]}, field)
    default = job.spec["root"].get("inputDefinitions", {}).get("parameters", {}).get(name, {})
    if "defaultValue" in default:
        return default["defaultValue"]
    raise SpecError(f"{field}: pipeline parameter {name!r} has no value (runtimeConfig) and no default")


def executor_input(task: Task, args: dict, outputs: dict[str, TaskOutputs], task_root: str,
                   new_name: Callable[[], str], producer: Callable[[str, str], str]) -> dict[str, Any]:
    """The ExecutorInput (as JSON) Vertex would hand the task's container, in gs:// terms."""
    spec = component_spec(task)
    without_artifacts = copy.deepcopy(spec)
    without_artifacts.input_definitions.ClearField("artifacts")
    message = executor_input_utils.construct_executor_input(without_artifacts, args, task_root)
    for key, definition in spec.input_definitions.parameters.items():
        if definition.type in _LEGACY_VALUE and key in args:
            field, convert = _LEGACY_VALUE[definition.type]
            try:
                setattr(message.inputs.parameters[key], field, convert(args[key]))
            except (TypeError, ValueError):
                raise SpecError(f"{task.field('inputs.parameters', key)}: {args[key]!r} is not a "
                                f"{pb.PrimitiveType.PrimitiveTypeEnum.Name(definition.type)}") from None
    for key, source in task.spec.get("inputs", {}).get("artifacts", {}).items():
        ref = source["taskOutputArtifact"]
        name = producer(ref["producerTask"], task.field("inputs.artifacts", key, "taskOutputArtifact.producerTask"))
        produced = outputs[name].artifacts
        if ref["outputArtifactKey"] not in produced:
            raise SpecError(f"{task.field('inputs.artifacts', key)}: task {name} has no output artifact "
                            f"{ref['outputArtifactKey']!r}")
        json_format.ParseDict({"artifacts": produced[ref["outputArtifactKey"]]}, message.inputs.artifacts[key])
    for artifact_list in message.outputs.artifacts.values():
        for artifact in artifact_list.artifacts:
            artifact.name = new_name()
    return executor_input_utils.executor_input_to_dict(message, spec)


def command_line(task: Task, where: str, command: list[str], args: list[str], local_input: dict[str, Any],
                 job_id: str, local_root: str, local_beam_args: list[str]) -> list[str]:
    """The spec's command and args, Beam's Dataflow flags swapped for local ones, placeholders resolved by kfp.local."""
    full = [*command, *replace_dataflow_args(args, local_beam_args)]
    _check_placeholders(task, where, command, args, local_input)
    try:
        resolved = placeholder_utils.replace_placeholders(full, local_input, job_id, task.name, local_root)
    except ValueError as e:
        raise SpecError(f"{task.executor_field(where)}: {e}") from None
    # The image's `python` is this environment's interpreter.
    return [sys.executable, *resolved[1:]] if resolved[0] in PYTHON else resolved


def split_entrypoint_args(args: list[str]) -> tuple[list[str], list[str]]:
    """(the entrypoint's own flags, the Beam flags), as TFX's entrypoint splits them (parse_known_args)."""
    own, beam, i = [], [], 0
    while i < len(args):
        if args[i] in ENTRYPOINT_FLAGS:
            own += args[i:i + 2]
            i += 2
            continue
        (own if args[i].split("=", 1)[0] in ENTRYPOINT_FLAGS else beam).append(args[i])
        i += 1
    return own, beam


def uses_dataflow(args: list[str]) -> bool:
    _, beam = split_entrypoint_args(args)
    runners = [a.split("=", 1)[1] for a in beam if a.startswith("--runner=")]
    runners += [beam[i + 1] for i, a in enumerate(beam[:-1]) if a == "--runner"]
    return any(r.endswith("DataflowRunner") for r in runners)


def replace_dataflow_args(args: list[str], local_beam_args: list[str]) -> list[str]:
    """Dataflow cannot be reached from here: its flags give way to the local Beam flags (announced by run.py)."""
    if not uses_dataflow(args):
        return list(args)
    own, _ = split_entrypoint_args(args)
    return [*own, *local_beam_args]


def _check_placeholders(task: Task, where: str, command: list[str], args: list[str], local_input: dict) -> None:
    for index, element in enumerate([*command, *args]):
        missing = unresolved_placeholders(element, local_input)
        if missing:
            kind, i = ("command", index) if index < len(command) else ("args", index - len(command))
            raise SpecError(f"{task.executor_field(where, kind)}[{i}]: placeholder {missing[0]} does not "
                            "resolve: the task's ExecutorInput has no such value")


def unresolved_placeholders(text: str, executor_input: dict[str, Any]) -> list[str]:
    """The `{{$...}}` placeholders in text that kfp.local would quietly turn into "null"."""
    missing = []
    for inner in _PLACEHOLDER.findall(text):
        placeholder = "{{$." + inner + "}}"
        if placeholder in _CONSTANT_PLACEHOLDERS or "json_escape" in inner:
            continue  # constants always resolve; kfp.local itself refuses json_escape
        parts = [p for p in re.split(r"\.|\[|\]|''|'", inner) if p]
        try:
            value = placeholder_utils.get_value_using_path(
                executor_input, placeholder_utils.convert_placeholder_parts_to_path(parts))
        except (IndexError, TypeError):
            value = None
        if value is None:
            missing.append(placeholder)
    return missing


def read_outputs(task: Task, local_input: dict[str, Any], to_gcs: Callable[[Any], Any]) -> TaskOutputs:
    """The task's ExecutorOutput merged over the provisioned outputs, as the launcher records them."""
    spec = component_spec(task)
    message = json_format.ParseDict(local_input, pb.ExecutorInput())
    written = executor_output_utils.load_executor_output(message.outputs.output_file)
    written = executor_output_utils.merge_dsl_output_file_parameters_to_executor_output(message, written, spec)
    written_dict = json_format.MessageToDict(written)
    artifacts = {}
    for key, provisioned in local_input["outputs"].get("artifacts", {}).items():
        produced = written_dict.get("artifacts", {}).get(key, {}).get("artifacts") or provisioned["artifacts"]
        artifacts[key] = [{**p, **w, "type": p["type"], "name": w.get("name") or p["name"]}
                          for p, w in zip(provisioned["artifacts"], produced)]
    parameters = {k: executor_output_utils.pb2_value_to_python(v) for k, v in written.parameter_values.items()}
    return TaskOutputs(to_gcs(artifacts), to_gcs(parameters))


def driver_updates(local_input: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict]]:
    """What a pre-cache-check driver wrote (parameter values, output artifact metadata); Vertex applies
    them to the task before the cache lookup. The file stays where TFX's entrypoint reads it again."""
    written = executor_output_utils.load_executor_output(local_input["outputs"]["outputFile"])
    as_dict = json_format.MessageToDict(written)
    parameters = {k: executor_output_utils.pb2_value_to_python(v) for k, v in written.parameter_values.items()}
    metadata = {k: v["artifacts"][0].get("metadata", {}) for k, v in as_dict.get("artifacts", {}).items()
                if v.get("artifacts")}
    return parameters, metadata
