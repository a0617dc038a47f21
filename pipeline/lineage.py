"""Which data and code made a model: `python -m pipeline lineage <serving version | model artifact id>`.

Everything is read back from MLMD by following events: the pushed model to
its Model, the Model to the Trainer run (config, code version) and its
Transform graph, the Transform run to the raw Examples, ExampleGen to the
dataset snapshot (its digest), and sideways to the statistics, schema,
anomalies, evaluation, blessing and pushes of the same artifacts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from typing import Optional

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.snapshot.component import SNAPSHOT_KEY
from pipeline.config import REPO_ROOT, Config
from pipeline.errors import LineageError
from pipeline.summary import anomalies_of, open_store

# Key in the Trainer's custom_config recording the code that trained the model.
CODE_VERSION_KEY = "code_version"

_INPUT, _OUTPUT = metadata_store_pb2.Event.INPUT, metadata_store_pb2.Event.OUTPUT
Artifact = metadata_store_pb2.Artifact
Execution = metadata_store_pb2.Execution


def code_version() -> str:
    """The git commit of this checkout ('-dirty' with uncommitted changes), or 'unknown' outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


@dataclasses.dataclass
class Lineage:
    model: Artifact
    snapshot: Optional[Artifact]
    examples: Artifact
    statistics: Optional[Artifact]
    schema: Artifact
    schema_file: Optional[str]
    anomalies: Optional[Artifact]
    transform_graph: Artifact
    trainer_config: dict
    code_version: str
    evaluation: Optional[Artifact]
    blessing: Optional[Artifact]
    pushes: list[Artifact]

    @property
    def digest(self) -> Optional[str]:
        return self.snapshot.custom_properties["digest"].string_value if self.snapshot else None


class _Graph:
    """Small helpers over MLMD events."""

    def __init__(self, store: metadata_store.MetadataStore):
        self.store = store
        self.type_names = {t.id: t.name for t in store.get_artifact_types()}

    def type_of(self, artifact: Artifact) -> str:
        return self.type_names[artifact.type_id]

    def _linked(self, execution_id: int, kind: int) -> dict[str, list[Artifact]]:
        events = [e for e in self.store.get_events_by_execution_ids([execution_id]) if e.type == kind]
        by_id = {a.id: a for a in self.store.get_artifacts_by_id([e.artifact_id for e in events])}
        out: dict[str, list[Artifact]] = {}
        for e in events:
            out.setdefault(e.path.steps[0].key, []).append(by_id[e.artifact_id])
        return out

    def inputs(self, execution: Execution) -> dict[str, list[Artifact]]:
        return self._linked(execution.id, _INPUT)

    def outputs(self, execution: Execution) -> dict[str, list[Artifact]]:
        return self._linked(execution.id, _OUTPUT)

    def producer(self, artifact: Artifact) -> Execution:
        ids = [e.execution_id for e in self.store.get_events_by_artifact_ids([artifact.id]) if e.type == _OUTPUT]
        if not ids:
            raise LineageError(f"artifact {artifact.id} ({self.type_of(artifact)}) has no producing execution")
        return self.store.get_executions_by_id([ids[0]])[0]

    def consumers(self, artifact: Artifact, key: str) -> list[Execution]:
        ids = [e.execution_id for e in self.store.get_events_by_artifact_ids([artifact.id])
               if e.type == _INPUT and e.path.steps and e.path.steps[0].key == key]
        return sorted(self.store.get_executions_by_id(ids), key=lambda x: x.id)

    def produced_from(self, artifact: Artifact, input_key: str, output_key: str) -> list[Artifact]:
        """Outputs `output_key` of executions that read `artifact` as input `input_key`, oldest first.

        A cached execution links to the same outputs again, hence the de-duplication.
        """
        found = {a.id: a for ex in self.consumers(artifact, input_key) for a in self.outputs(ex).get(output_key, [])}
        return [found[i] for i in sorted(found)]


def _one(artifacts: dict[str, list[Artifact]], key: str, what: str) -> Artifact:
    if not artifacts.get(key):
        raise LineageError(f"no {what} recorded (input {key!r})")
    return artifacts[key][0]


def _prop(execution: Execution, key: str) -> str:
    return execution.custom_properties[key].string_value if key in execution.custom_properties else ""


def find_model(store: metadata_store.MetadataStore, ref: str,
               serving_dir: str) -> tuple[Artifact, Optional[Artifact]]:
    """(Model, PushedModel or None) from a pushed version (a directory in serving_dir) or a Model artifact id."""
    graph = _Graph(store)
    if os.path.basename(ref.rstrip("/")) != ref and os.path.isdir(ref):
        ref = os.path.basename(ref.rstrip("/"))
    pushed = [a for a in store.get_artifacts_by_type("PushedModel")
              if a.custom_properties["pushed_version"].string_value == ref
              and a.custom_properties["pushed"].int_value == 1]
    if pushed:
        return _one(graph.inputs(graph.producer(pushed[-1])), "model", "model for this push"), pushed[-1]
    if ref.isdigit():
        found = store.get_artifacts_by_id([int(ref)])
        if found and graph.type_of(found[0]) == "Model":
            return found[0], None
    raise LineageError(f"{ref!r} is neither a pushed version in {serving_dir} nor a Model artifact id in MLMD")


def trace(store: metadata_store.MetadataStore, model: Artifact, push: Optional[Artifact] = None) -> Lineage:
    """The model's history; given the push, the evaluation and blessing are the ones that allowed it."""
    graph = _Graph(store)
    trainer = graph.producer(model)
    trainer_in = graph.inputs(trainer)
    transform_graph = _one(trainer_in, "transform_graph", "Transform graph")
    transform_in = graph.inputs(graph.producer(transform_graph))
    examples = _one(transform_in, "examples", "raw examples")
    schema = _one(transform_in, "schema", "schema")
    example_gen_in = graph.inputs(graph.producer(examples))
    # ExampleGen read the snapshot's data dir (a String made by the Snapshot step).
    snapshots = [s for arts in example_gen_in.values() for a in arts if graph.type_of(a) == "String"
                 for s in graph.outputs(graph.producer(a)).get(SNAPSHOT_KEY, [])]
    statistics = graph.produced_from(examples, "examples", "statistics")
    anomalies = [a for s in statistics for a in graph.produced_from(s, "statistics", "anomalies")]
    config = json.loads(_prop(trainer, "custom_config") or "{}")
    if push is not None:
        blessings = [_one(graph.inputs(graph.producer(push)), "model_blessing", "blessing for this push")]
        evaluations = graph.outputs(graph.producer(blessings[0])).get("evaluation", [])
    else:
        evaluations = graph.produced_from(model, "model", "evaluation")
        blessings = graph.produced_from(model, "model", "blessing")
    pushes = [p for p in graph.produced_from(model, "model", "pushed_model")
              if p.custom_properties["pushed"].int_value == 1]
    return Lineage(
        model=model, snapshot=snapshots[0] if snapshots else None, examples=examples,
        statistics=statistics[-1] if statistics else None, schema=schema,
        schema_file=_prop(graph.producer(schema), "schema_file") or None,
        anomalies=anomalies[-1] if anomalies else None, transform_graph=transform_graph,
        trainer_config=config.get("trainer", {}), code_version=config.get(CODE_VERSION_KEY, "unknown"),
        evaluation=evaluations[-1] if evaluations else None, blessing=blessings[-1] if blessings else None,
        pushes=pushes)


def format_lineage(lin: Lineage) -> str:
    def row(label: str, art: Optional[Artifact], extra: str = "") -> str:
        where = f"artifact {art.id}  {art.uri}" if art is not None else "(not recorded)"
        return f"{label:<12} {where}" + (f"\n{'':<13}{extra}" if extra else "")

    lines = []
    if lin.snapshot is not None:
        p = lin.snapshot.custom_properties
        lines.append(row("snapshot", lin.snapshot,
                         f"digest {lin.digest}  rows {p['rows'].int_value}  created {p['created'].string_value}\n"
                         f"{'':<13}stored at {p['snapshot_uri'].string_value}\n"
                         f"{'':<13}copied from {p['source_uri'].string_value}"))
    else:
        lines.append("snapshot     (none: these examples were not made from a snapshot)")
    lines.append(row("examples", lin.examples))
    lines.append(row("statistics", lin.statistics))
    lines.append(row("schema", lin.schema, f"imported from {lin.schema_file}" if lin.schema_file else ""))
    found = anomalies_of(lin.anomalies)
    lines.append(row("anomalies", lin.anomalies, "\n".join(f"{'':<13}{a}" for a in found).lstrip()
                     if found else "none found"))
    lines.append(row("transform", lin.transform_graph))
    lines.append(row("model", lin.model, f"code version {lin.code_version}\n{'':<13}trainer config "
                     + json.dumps(lin.trainer_config, sort_keys=True)))
    lines.append(row("evaluation", lin.evaluation))
    if lin.blessing is not None:
        ok = lin.blessing.custom_properties["blessed"].int_value == 1
        lines.append(row("blessing", lin.blessing, "blessed" if ok else "NOT blessed"))
    else:
        lines.append(row("blessing", None))
    for p in lin.pushes:
        lines.append(row("pushed", p, f"version {p.custom_properties['pushed_version'].string_value} -> "
                         f"{p.custom_properties['pushed_destination'].string_value}"))
    if not lin.pushes:
        lines.append("pushed       never")
    return "\n".join(lines)


def cmd_lineage(config: Config, ref: str) -> str:
    if not os.path.exists(config.pipeline.metadata_path):
        raise LineageError(f"no metadata store at {config.pipeline.metadata_path}: run the pipeline first")
    store = open_store(config.pipeline.metadata_path)
    return format_lineage(trace(store, *find_model(store, ref, config.pipeline.serving_dir)))
