"""The rules on a spec's containers: their commands, placeholders, resources and artifact types."""

from __future__ import annotations

import importlib.util
import re
from typing import Iterator

from pipeline.spec.backends import Backend
from pipeline.spec.model import (
    PLACEHOLDER,
    PYTHON,
    Pipeline,
    SpecError,
    Task,
    artifact_class,
    import_class,
)
from pipeline.spec.rules.violation import Violation

# The placeholders the open-source launcher replaces (backend/src/v2/component/launcher_v2.go,
# `compileCmdAndArgs` and `getPlaceholders`); it leaves any other text as it is.
_LAUNCHER_PLACEHOLDERS = (
    (re.compile(r"\{\{\$\}\}"), None),
    (re.compile(r"\{\{\$\.inputs\.artifacts\['([^']+)'\]\.(?:uri|path)\}\}"), ("inputDefinitions", "artifacts")),
    (re.compile(r"\{\{\$\.outputs\.artifacts\['([^']+)'\]\.(?:uri|path)\}\}"), ("outputDefinitions", "artifacts")),
    (re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}"), ("inputDefinitions", "parameters")),
    (re.compile(r"\{\{\$\.outputs\.parameters\['([^']+)'\]\.output_file\}\}"), ("outputDefinitions", "parameters")),
)
_CONTAINER_FIELDS = {"image", "command", "args", "lifecycle", "env", "resources"}
# The ResourceSpec fields the KFP SDK writes for set_cpu_request & co. (kfp 2.5); the dry run checks them, it
# does not enforce them.
_RESOURCES = ("cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit")

def placeholders(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind != "container":
            continue
        for where, command, args in _commands(task):
            for part, items in (("command", command), ("args", args)):
                for i, text in enumerate(items):
                    for placeholder in PLACEHOLDER.findall(text):
                        why = _placeholder_problem(task, placeholder)
                        if why:
                            yield Violation("placeholders", task.executor_field(where, part) + f"[{i}]",
                                            f"{placeholder} {why}", task.name)


def _placeholder_problem(task: Task, placeholder: str) -> str:
    for pattern, declared_in in _LAUNCHER_PLACEHOLDERS:
        match = pattern.fullmatch(placeholder)
        if match is None:
            continue
        if declared_in is None or match[1] in task.declared(*declared_in):
            return ""
        return f"names {match[1]!r}, which {task.component_name} does not declare in {'.'.join(declared_in)}"
    return "is not a placeholder the launcher replaces (it would reach the program as literal text)"


def _commands(task: Task) -> list[tuple[str, list[str], list[str]]]:
    container = task.container
    found = [("container", container.get("command", []), container.get("args", []))]
    pre = container.get("lifecycle", {}).get("preCacheCheck")
    if pre is not None:
        found.append(("container.lifecycle.preCacheCheck", pre.get("command", []), pre.get("args", [])))
    return found


def containers(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind != "container":
            continue
        for extra in sorted(set(task.container) - _CONTAINER_FIELDS):
            yield Violation("container", task.executor_field("container", extra), "not emulated by the dry run",
                            task.name)
        resources = task.container.get("resources", {})
        for extra in sorted(set(resources) - set(_RESOURCES)):
            yield Violation("container", task.executor_field("container.resources", extra), "not emulated by the "
                            "dry run", task.name)
        for kind in ("cpu", "memory"):
            request, limit = resources.get(f"{kind}Request"), resources.get(f"{kind}Limit")
            if request is not None and limit is not None and request > limit:
                yield Violation("container", task.executor_field("container.resources", f"{kind}Request"),
                                f"{request} is above the limit {limit}: Kubernetes refuses the pod", task.name)
        for hook in sorted(set(task.container.get("lifecycle", {})) - backend.lifecycle_hooks):
            yield Violation("container", task.executor_field("container.lifecycle", hook),
                            f"{backend.title} does not run this hook", task.name)
        for where, command, args in _commands(task):
            yield from _command(task, where, command, args)


def _command(task: Task, where: str, command: list[str], args: list[str]) -> Iterator[Violation]:
    field = task.executor_field(where, "command")
    if not command or command[0] not in PYTHON:
        yield Violation("container", field, f"{command[:1]} cannot run here; the dry run runs `python ...` "
                        "commands in this environment instead of the image", task.name)
        return
    if len(command) >= 3 and command[1] == "-m" and importlib.util.find_spec(command[2]) is None:
        yield Violation("container", field + "[2]", f"module {command[2]!r} is not importable "
                        "(it would be missing from the image too)", task.name)
    if "--executor_class_path" in args:
        i = args.index("--executor_class_path")
        try:
            import_class(args[i + 1] if i + 1 < len(args) else "", "")
        except SpecError as e:
            yield Violation("container", task.executor_field(where, "args") + f"[{i + 1}]",
                            "--executor_class_path " + str(e).lstrip(": "), task.name)


def artifact_types(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind != "container":
            continue
        for side in ("inputDefinitions", "outputDefinitions"):
            for key, definition in task.declared(side, "artifacts").items():
                field = task.component_field(side, "artifacts", key, "artifactType")
                try:
                    artifact_class(definition.get("artifactType", {}), field)
                except SpecError as e:
                    yield Violation("artifact-types", field, str(e).split(": ", 1)[-1], task.name)
