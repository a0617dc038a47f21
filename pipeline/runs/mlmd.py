"""The one reader of ML Metadata: runs, their executions, the artifacts they
read and wrote, and the properties recorded on both. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
from typing import Optional

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.data.snapshot.component import DatasetSnapshot

Artifact = metadata_store_pb2.Artifact
Execution = metadata_store_pb2.Execution
Context = metadata_store_pb2.Context
_INPUT, _OUTPUT = metadata_store_pb2.Event.INPUT, metadata_store_pb2.Event.OUTPUT
# TFX's context types: one per pipeline run, one per node (component).
RUN_CONTEXT, NODE_CONTEXT = "pipeline_run", "node"
_STATES = {Execution.COMPLETE: "ran", Execution.CACHED: "cached", Execution.FAILED: "failed",
           Execution.RUNNING: "running"}
# How many run ids a miss lists, newest first.
NEWEST_LISTED = 5
# Vertex (KFP v2) registers custom types as `<namespace>.<Name>`; the name part identifies a snapshot.
_SNAPSHOT_NAME = DatasetSnapshot.TYPE_NAME.rpartition(".")[2]


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    """The SQLite store of a local run, read-only."""
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


def is_snapshot(type_name: str) -> bool:
    """A DatasetSnapshot artifact type, in whichever namespace it was registered."""
    return type_name.rpartition(".")[2] == _SNAPSHOT_NAME


def properties(entity: Artifact | Execution) -> dict[str, object]:
    """Properties and custom properties as plain Python values."""
    merged = {**entity.properties, **entity.custom_properties}
    return {k: getattr(v, v.WhichOneof("value")) for k, v in merged.items() if v.WhichOneof("value")}


def dir_name(run_id: str) -> str:
    """A run's directory under <root>/runs/ (its report): the id without ':', which some file systems refuse."""
    return run_id.replace(":", "")


def state_of(execution: Execution) -> str:
    return _STATES.get(execution.last_known_state, "unknown")


@dataclasses.dataclass
class ArtifactInfo:
    """An artifact as the summary and the report show it."""
    id: int
    type_name: str
    uri: str
    properties: dict[str, object]


class Reader:
    """Questions about one metadata store; artifact type names are looked up once."""

    def __init__(self, store: metadata_store.MetadataStore, where: str = "this metadata store"):
        self.store = store
        self.where = where
        self._type_names = {t.id: t.name for t in store.get_artifact_types()}

    @classmethod
    def open(cls, metadata_path: str) -> "Reader":
        return cls(open_store(metadata_path), metadata_path)

    def type_name(self, artifact: Artifact) -> str:
        if artifact.type_id not in self._type_names:  # registered after this reader was made
            self._type_names = {t.id: t.name for t in self.store.get_artifact_types()}
        return self._type_names[artifact.type_id]

    def info(self, artifact: Artifact) -> ArtifactInfo:
        return ArtifactInfo(artifact.id, self.type_name(artifact), artifact.uri, properties(artifact))

    # -- runs ---------------------------------------------------------------

    def run(self, pipeline_name: str, run_id: Optional[str] = None) -> Context:
        """The run `run_id` (as MLMD names it, or as its directory under <root>/runs/ is named), or the latest run
        of the pipeline; LookupError listing the newest runs' ids when there is no such run."""
        if run_id is None:
            return self.latest_run(pipeline_name)
        run = self.store.get_context_by_type_and_name(RUN_CONTEXT, run_id)
        if run is not None:
            return run
        runs = self.runs(pipeline_name)
        named = [r for r in runs if dir_name(r.name) == run_id]
        if len(named) == 1:
            return named[0]
        newest = [r.name for r in reversed(runs[-NEWEST_LISTED:])]
        raise LookupError(f"no run {run_id!r} in {self.where}; " + (
            f"the newest runs of {pipeline_name!r}: {', '.join(newest)} (each also as its directory under runs/ is "
            f"named, e.g. {dir_name(newest[0])})" if newest else f"no runs of pipeline {pipeline_name!r} there yet"))

    def latest_run(self, pipeline_name: str) -> Context:
        runs = self.runs(pipeline_name)
        if not runs:
            raise LookupError(f"no runs of pipeline {pipeline_name!r} in {self.where}")
        return runs[-1]

    def runs(self, pipeline_name: str) -> list[Context]:
        """Every run of the pipeline, oldest first."""
        runs = [c for c in self.store.get_contexts_by_type(RUN_CONTEXT)
                if any(p.name == pipeline_name for p in self.store.get_parent_contexts_by_context(c.id))]
        return sorted(runs, key=lambda c: (c.create_time_since_epoch, c.id))

    def executions(self, run: Context) -> list[tuple[str, Execution]]:
        """(component id, execution) of every execution in the run, in the order they started."""
        result = []
        for execution in sorted(self.store.get_executions_by_context(run.id), key=lambda e: e.id):
            node = next(c.name for c in self.store.get_contexts_by_execution(execution.id) if c.type == NODE_CONTEXT)
            result.append((node.split(".", 1)[1], execution))  # node contexts are named <pipeline>.<component>
        return result

    def execution(self, execution_id: int) -> Execution:
        return self.store.get_executions_by_id([execution_id])[0]

    # -- artifacts and events -----------------------------------------------

    def artifact(self, artifact_id: int) -> Optional[Artifact]:
        found = self.store.get_artifacts_by_id([artifact_id])
        return found[0] if found else None

    def artifacts_of_type(self, type_name: str) -> list[Artifact]:
        return list(self.store.get_artifacts_by_type(type_name))

    def _linked(self, execution: Execution, kind: int) -> dict[str, list[Artifact]]:
        events = [e for e in self.store.get_events_by_execution_ids([execution.id]) if e.type == kind]
        by_id = {a.id: a for a in self.store.get_artifacts_by_id([e.artifact_id for e in events])}
        out: dict[str, list[Artifact]] = {}
        for e in events:
            key = e.path.steps[0].key if e.path.steps else ""  # TFX names every event; others may not
            out.setdefault(key, []).append(by_id[e.artifact_id])
        return out

    def inputs(self, execution: Execution) -> dict[str, list[Artifact]]:
        """Input key -> the artifacts the execution read."""
        return self._linked(execution, _INPUT)

    def outputs(self, execution: Execution) -> dict[str, list[Artifact]]:
        """Output key -> the artifacts the execution wrote."""
        return self._linked(execution, _OUTPUT)

    def producer(self, artifact: Artifact) -> Optional[Execution]:
        ids = [e.execution_id for e in self.store.get_events_by_artifact_ids([artifact.id]) if e.type == _OUTPUT]
        return self.execution(ids[0]) if ids else None

    def consumers(self, artifact: Artifact, key: str) -> list[Execution]:
        """Executions that read `artifact` as input `key`, oldest first."""
        ids = [e.execution_id for e in self.store.get_events_by_artifact_ids([artifact.id])
               if e.type == _INPUT and e.path.steps and e.path.steps[0].key == key]
        return sorted(self.store.get_executions_by_id(ids), key=lambda x: x.id)

    def produced_from(self, artifact: Artifact, input_key: str, output_key: str) -> list[Artifact]:
        """Outputs `output_key` of executions that read `artifact` as input `input_key`, oldest first.

        A cached execution links to the same outputs again, hence the de-duplication.
        """
        found = {a.id: a for ex in self.consumers(artifact, input_key) for a in self.outputs(ex).get(output_key, [])}
        return [found[i] for i in sorted(found)]


def anomalies_of(artifact: Optional[Artifact]) -> list:
    """The anomalies in an ExampleAnomalies artifact, read by the data gate's own parser."""
    if artifact is None:
        return []
    from tfx.types.standard_artifacts import ExampleAnomalies

    from components.data.data_gate import read_anomalies

    anomalies = ExampleAnomalies()
    anomalies.set_mlmd_artifact(artifact)
    return read_anomalies(anomalies)
