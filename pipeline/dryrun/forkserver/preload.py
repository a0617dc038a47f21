"""What the fork server imports before it forks: the imports a compiled spec's tasks make before their own work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable


def preload_modules(template: Path) -> list[str]:
    """What the tasks of a compiled spec (Vertex JSON or Kubeflow YAML) import before their own work."""
    import importlib.util

    import yaml

    text = Path(template).read_text()
    # A Kubeflow package's first document is the pipeline spec (a platform spec may follow).
    body = json.loads(text) if Path(template).suffix == ".json" else next(yaml.safe_load_all(text))
    spec = body.get("pipelineSpec", body)
    modules: list[str] = []
    for executor in spec.get("deploymentSpec", {}).get("executors", {}).values():
        container = executor.get("container")
        if not container:
            continue
        hooks = [h for h in container.get("lifecycle", {}).values() if isinstance(h, dict)]
        for part in (container, *hooks):
            command = [*part.get("command", []), *part.get("args", [])]
            if len(command) > 2 and command[1] == "-m":
                modules += imports_of(command[2], importlib.util.find_spec)
            for i, arg in enumerate(command[:-1]):
                if arg == "--executor_class_path":
                    executor_module = command[i + 1].rpartition(".")[0]
                    modules.append(executor_module)
                    if executor_module.startswith("tfx.extensions.google_cloud_ai_platform."):
                        # Its CustomJob runs TFX's own entrypoint in each replica.
                        from tfx.extensions.google_cloud_ai_platform import training_clients

                        modules += imports_of(training_clients._CONTAINER_COMMAND[2], importlib.util.find_spec)
    return list(dict.fromkeys(modules))


def imports_of(module: str, find_spec: Callable) -> list[str]:
    """What `module` imports (it runs as __main__ itself), at its top or in its functions (an entrypoint may
    import its framework when called): `name` for `import name`, `module:name` for `from module import name`."""
    import ast

    spec = find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    tree = ast.parse(Path(spec.origin).read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [f"{node.module}:{a.name}" for a in node.names]
    return names


def preload(entry: str) -> None:
    """`import module` for "module", `from module import name` for "module:name"."""
    import importlib

    module, _, name = entry.partition(":")
    imported = importlib.import_module(module)
    if name and name != "*" and not hasattr(imported, name):
        importlib.import_module(f"{module}.{name}")
