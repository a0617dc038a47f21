"""The dry runs written to a local ML Metadata store, so `make run`'s summary and report read them.
Why and sources: docs/internals.md."""

from __future__ import annotations

import json
from typing import Any, Callable

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd

from pipeline.runs.mlmd import NODE_CONTEXT, RUN_CONTEXT
from pipeline.spec.model import artifact_class

PIPELINE_CONTEXT = "pipeline"
STATES = {"ran": mlmd.Execution.COMPLETE, "cached": mlmd.Execution.CACHED, "failed": mlmd.Execution.FAILED}


class Recorder:
    def __init__(self, metadata_path: str, pipeline: str, to_local: Callable[[Any], Any]):
        config = mlmd.ConnectionConfig()
        config.sqlite.filename_uri = metadata_path
        config.sqlite.connection_mode = mlmd.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        self.store = metadata_store.MetadataStore(config)
        self.pipeline_name, self.to_local = pipeline, to_local
        self.pipeline = self._context(PIPELINE_CONTEXT, pipeline)
        self.run = None
        self._contexts: dict[int, list[mlmd.Context]] = {}

    def _context(self, type_name: str, name: str, parent: mlmd.Context | None = None) -> mlmd.Context:
        found = self.store.get_context_by_type_and_name(type_name, name)
        if found is not None:
            return found
        context = mlmd.Context(type_id=self.store.put_context_type(mlmd.ContextType(name=type_name)), name=name)
        context.id = self.store.put_contexts([context])[0]
        if parent is not None:
            self.store.put_parent_contexts([mlmd.ParentContext(child_id=context.id, parent_id=parent.id)])
        return context

    def start_run(self, job_id: str) -> None:
        self.run = self._context(RUN_CONTEXT, job_id, self.pipeline)

    def start(self, task: str, kind: str, parameters: dict[str, Any]) -> mlmd.Execution:
        """A RUNNING execution now; finish() sets its outcome (and so its duration)."""
        execution = mlmd.Execution(type_id=self.store.put_execution_type(mlmd.ExecutionType(name=kind)),
                                   last_known_state=mlmd.Execution.RUNNING)
        for key, value in parameters.items():
            _set(execution.custom_properties[key], value)
        node = self._context(NODE_CONTEXT, f"{self.pipeline_name}.{task}", self.pipeline)
        execution.id, _, _ = self.store.put_execution(execution, [], [self.pipeline, self.run, node])
        self._contexts[execution.id] = [self.pipeline, self.run, node]
        return execution

    def finish(self, execution: mlmd.Execution, state: str, inputs: dict[str, list[dict]],
               outputs: dict[str, list[dict]], extra: dict[str, Any]) -> None:
        execution.last_known_state = STATES[state]
        for key, value in extra.items():
            _set(execution.custom_properties[key], value)
        pairs, seen = [], set()
        for kind, artifacts in ((mlmd.Event.INPUT, inputs), (mlmd.Event.OUTPUT, outputs)):
            for key, items in artifacts.items():
                for i, a in enumerate(items):
                    # MLMD keeps one event per artifact and direction; a cached model that is also the
                    # resolved baseline is read twice by the Evaluator, and recorded under its first key.
                    if (a["name"], kind) not in seen:
                        seen.add((a["name"], kind))
                        pairs.append((self._artifact(a), _event(kind, key, i)))
        self.store.put_execution(execution, pairs, self._contexts.pop(execution.id))

    def _artifact(self, runtime: dict[str, Any]) -> mlmd.Artifact:
        """The MLMD artifact of a RuntimeArtifact, registered once (by resource name) under its TFX type."""
        cls = artifact_class(runtime["type"], f"artifact {runtime.get('name')}")
        artifact_type = cls().artifact_type
        existing = self.store.get_artifact_by_type_and_name(artifact_type.name, runtime["name"])
        if existing is not None:
            return existing
        type_id = self.store.put_artifact_type(artifact_type, can_add_fields=True)
        artifact = mlmd.Artifact(type_id=type_id, name=runtime["name"], uri=self.to_local(runtime.get("uri", "")),
                                 state=mlmd.Artifact.LIVE)
        for key, value in self.to_local(runtime.get("metadata", {})).items():
            kind = artifact_type.properties.get(key)
            if kind is not None:
                _set(artifact.properties[key], value, kind)
            else:
                _set(artifact.custom_properties[key], value)
        return artifact


def _event(kind: int, key: str, index: int) -> mlmd.Event:
    event = mlmd.Event(type=kind)
    event.path.steps.add().key = key
    event.path.steps.add().index = index
    return event


def _set(target: mlmd.Value, value: Any, kind: int | None = None) -> None:
    """A JSON value as MLMD holds it: RuntimeArtifact metadata makes every number a float; ints come back."""
    if kind == mlmd.STRING or (kind is None and isinstance(value, str)):
        target.string_value = value if isinstance(value, str) else json.dumps(value)
    elif isinstance(value, bool):
        target.int_value = int(value)
    elif isinstance(value, (int, float)) and kind != mlmd.DOUBLE and float(value).is_integer():
        target.int_value = int(value)
    elif isinstance(value, (int, float)):
        target.double_value = float(value)
    else:
        target.string_value = json.dumps(value)
