"""The launcher's half of a container task: its command line, the process, and the outputs it publishes.
Why and sources: docs/internals.md."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable

from google.protobuf import json_format
from kfp.local import executor_output_utils, placeholder_utils
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from pipeline.config import REPO_ROOT
from pipeline.dryrun import forkserver
from pipeline.dryrun.driver import TaskOutputs, component_spec
from pipeline.errors import SpecError
from pipeline.spec.model import ENTRYPOINT_FLAGS, PYTHON, Task, artifact_class

_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*")
_PLACEHOLDER = re.compile(r"\{\{\$[^}]*\}\}")


def command_line(task: Task, where: str, container: dict[str, Any], local_input: dict[str, Any], job_id: str,
                 local_root: str, local_beam_args: list[str]) -> list[str]:
    """The spec's command and args, Beam's Dataflow flags swapped for local ones, placeholders resolved."""
    full = [*container.get("command", []), *replace_dataflow_args(container.get("args", []), local_beam_args)]
    for text in full:
        for placeholder in _PLACEHOLDER.findall(text):
            # rules.py checked it names a declared input; kfp.local would write "null" for an empty one.
            if placeholder != "{{$}}" and placeholder_value(placeholder, local_input) is None:
                raise SpecError(f"{task.executor_field(where)}: placeholder {placeholder} has no value in the "
                                "task's ExecutorInput (an input left empty at run time)")
    try:
        resolved = placeholder_utils.replace_placeholders(full, local_input, job_id, task.name, local_root)
    except ValueError as e:
        raise SpecError(f"{task.executor_field(where)}: {e}") from None
    # The image's `python` is this environment's interpreter.
    return [sys.executable, *resolved[1:]] if resolved[0] in PYTHON else resolved


def placeholder_value(placeholder: str, executor_input: dict[str, Any]) -> Any:
    inner = placeholder[len("{{$."):-len("}}")]
    parts = [p for p in re.split(r"\.|\[|\]|''|'", inner) if p]
    try:
        return placeholder_utils.get_value_using_path(
            executor_input, placeholder_utils.convert_placeholder_parts_to_path(parts))
    except (IndexError, TypeError, KeyError):
        return None


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


def make_output_dirs(executor_input: dict[str, Any], local: Callable[[str], str], launcher_outputs=()) -> None:
    """GCS has no directories to create; the mapped bucket has. Made as TFX's own launcher makes them
    (outputs_utils.make_output_dirs): the directory of an artifact, the parent of a value artifact's file.
    The backend launcher's own outputs (backend.py) are its to write."""
    from tfx.types.value_artifact import ValueArtifact

    for key, items in executor_input["outputs"].get("artifacts", {}).items():
        if key in launcher_outputs:
            continue
        for artifact in items.get("artifacts", []):
            path = Path(local(artifact["uri"]))
            cls = artifact_class(artifact["type"], f"outputs.artifacts.{key}")
            (path.parent if issubclass(cls, ValueArtifact) else path).mkdir(parents=True, exist_ok=True)


def run_process(task: Task, where: str, command: list[str], env: dict[str, str], task_log: Path) -> str:
    """Run one of the task's commands as a local process (forkserver/: forked when it can be); '' on
    success, else why it failed."""
    with open(task_log, "a") as out:
        out.write(f"$ {where}: {' '.join(command[:4])} ...\n")
        out.flush()
        process = forkserver.start(command, env, REPO_ROOT, out)
        try:
            code = process.wait()
        except BaseException:  # as subprocess.run: the process does not outlive an interrupted wait
            process.kill()
            process.wait()
            raise
    if code == 0:
        return ""
    lines = task_log.read_text(errors="replace").splitlines()
    cause = next((line for line in reversed(lines) if _EXCEPTION_LINE.match(line)), lines[-1] if lines else "")
    return f"{task.executor_field(where, 'command')} exited with status {code}: {cause}"


def read_outputs(task: Task, local_input: dict[str, Any], to_gcs: Callable[[Any], Any],
                 launcher_outputs=()) -> TaskOutputs:
    """The task's ExecutorOutput merged over the provisioned outputs, as the launcher records them
    (its own outputs, backend.py, are not the task's)."""
    spec = component_spec(task)
    message = json_format.ParseDict(local_input, pb.ExecutorInput())
    written = executor_output_utils.load_executor_output(message.outputs.output_file)
    written = executor_output_utils.merge_dsl_output_file_parameters_to_executor_output(message, written, spec)
    written_dict = json_format.MessageToDict(written)
    artifacts = {}
    for key, provisioned in local_input["outputs"].get("artifacts", {}).items():
        if key in launcher_outputs:
            continue
        produced = written_dict.get("artifacts", {}).get(key, {}).get("artifacts") or provisioned["artifacts"]
        artifacts[key] = [{**p, **w, "type": p["type"], "name": w.get("name") or p["name"]}
                          for p, w in zip(provisioned["artifacts"], produced)]
    parameters = {k: executor_output_utils.pb2_value_to_python(v) for k, v in written.parameter_values.items()}
    return TaskOutputs(to_gcs(artifacts), to_gcs(parameters))
