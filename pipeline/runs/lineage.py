"""Which data and code made a model: `python -m pipeline lineage <serving version | model artifact id>`.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from typing import Optional

from ml_metadata.metadata_store import metadata_store

from components.scoring import keys as scoring_keys
from pipeline.config import REPO_ROOT, Config
from pipeline.errors import LineageError
from pipeline.runs import mlmd
from pipeline.runs.mlmd import Artifact, Execution
from trainer import role_table

# Key in the Trainer's custom_config recording the code that trained the model.
CODE_VERSION_KEY = "code_version"
# The images have no git: infra/docker/Dockerfile* set this from the build arg
# CODE_VERSION (Cloud Build passes the commit), and compiling inside an image
# reads it here.
CODE_VERSION_ENV = "PIPELINE_CODE_VERSION"


def code_version() -> str:
    """$PIPELINE_CODE_VERSION when set (inside an image), else the git commit of
    this checkout ('-dirty' with uncommitted changes), or 'unknown' outside git."""
    if os.environ.get(CODE_VERSION_ENV, "").strip():
        return os.environ[CODE_VERSION_ENV].strip()
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
    # Predictions the BulkInferrer made with this model's pushed versions (inference.input_dir).
    scored: list[Artifact] = dataclasses.field(default_factory=list)

    @property
    def digest(self) -> Optional[str]:
        return mlmd.properties(self.snapshot).get("digest") if self.snapshot else None


def _required(artifacts: dict[str, list[Artifact]], key: str, what: str) -> Artifact:
    if not artifacts.get(key):
        raise LineageError(f"no {what} recorded (input {key!r})")
    return artifacts[key][0]


def _producer(reader: mlmd.Reader, artifact: Artifact) -> Execution:
    execution = reader.producer(artifact)
    if execution is None:
        raise LineageError(f"artifact {artifact.id} ({reader.type_name(artifact)}) has no producing execution")
    return execution


def _prop(entity: Artifact | Execution, key: str) -> str:
    return str(mlmd.properties(entity).get(key, ""))


def find_model(store: metadata_store.MetadataStore, ref: str,
               serving_dir: str) -> tuple[Artifact, Optional[Artifact]]:
    """(Model, PushedModel or None) from a pushed version (a directory in serving_dir) or a Model artifact id."""
    reader = mlmd.Reader(store)
    if os.path.basename(ref.rstrip("/")) != ref and os.path.isdir(ref):
        ref = os.path.basename(ref.rstrip("/"))
    pushed = [a for a in reader.artifacts_of_type("PushedModel")
              if mlmd.properties(a).get("pushed_version") == ref and mlmd.properties(a).get("pushed") == 1]
    if pushed:
        return _required(reader.inputs(_producer(reader, pushed[-1])), "model", "model for this push"), pushed[-1]
    if ref.isdigit():
        found = reader.artifact(int(ref))
        if found is not None and reader.type_name(found) == "Model":
            return found, None
    raise LineageError(f"{ref!r} is neither a pushed version in {serving_dir} nor a Model artifact id in MLMD")


def _snapshots_behind(reader: mlmd.Reader, examples: Artifact) -> list[Artifact]:
    """Snapshots ExampleGen read: the DatasetSnapshot is its input (components/data/example_gen.py)."""
    return [s for artifacts in reader.inputs(_producer(reader, examples)).values() for s in artifacts
            if mlmd.is_snapshot(reader.type_name(s))]


def trace(store: metadata_store.MetadataStore, model: Artifact, push: Optional[Artifact] = None) -> Lineage:
    """The model's history; given the push, the evaluation and blessing are the ones that allowed it."""
    reader = mlmd.Reader(store)
    trainer = _producer(reader, model)
    transform_graph = _required(reader.inputs(trainer), "transform_graph", "Transform graph")
    transform_in = reader.inputs(_producer(reader, transform_graph))
    examples = _required(transform_in, "examples", "raw examples")
    schema = _required(transform_in, "schema", "schema")
    snapshots = _snapshots_behind(reader, examples)
    statistics = reader.produced_from(examples, "examples", "statistics")
    anomalies = [a for s in statistics for a in reader.produced_from(s, "statistics", "anomalies")]
    config = json.loads(_prop(trainer, "custom_config") or "{}")
    if push is not None:
        blessings = [_required(reader.inputs(_producer(reader, push)), "model_blessing", "blessing for this push")]
        evaluations = reader.outputs(_producer(reader, blessings[0])).get("evaluation", [])
    else:
        evaluations = reader.produced_from(model, "model", "evaluation")
        blessings = reader.produced_from(model, "model", "blessing")
    pushes = [p for p in reader.produced_from(model, "model", "pushed_model") if mlmd.properties(p).get("pushed") == 1]
    versions = {mlmd.properties(p).get("pushed_version") for p in pushes}
    scored = [a for a in reader.artifacts_of_type(scoring_keys.PREDICTIONS_TYPE)
              if mlmd.properties(a).get(scoring_keys.MODEL_VERSION) in versions]
    return Lineage(
        model=model, snapshot=snapshots[0] if snapshots else None, examples=examples,
        statistics=statistics[-1] if statistics else None, schema=schema,
        schema_file=_prop(_producer(reader, schema), "schema_file") or None,
        anomalies=anomalies[-1] if anomalies else None, transform_graph=transform_graph,
        trainer_config=config.get("trainer", {}), code_version=config.get(CODE_VERSION_KEY, "unknown"),
        evaluation=evaluations[-1] if evaluations else None, blessing=blessings[-1] if blessings else None,
        pushes=pushes, scored=scored)


def format_lineage(lin: Lineage) -> str:
    def row(label: str, art: Optional[Artifact], extra: str = "") -> str:
        where = f"artifact {art.id}  {art.uri}" if art is not None else "(not recorded)"
        return f"{label:<12} {where}" + (f"\n{'':<13}{extra}" if extra else "")

    lines = []
    if lin.snapshot is not None:
        p = mlmd.properties(lin.snapshot)
        lines.append(row("snapshot", lin.snapshot,
                         f"digest {lin.digest}  rows {p.get('rows', 0)}  created {p.get('created', '')}\n"
                         f"{'':<13}stored at {p.get('snapshot_uri', '')}\n"
                         f"{'':<13}copied from {p.get('source_uri', '')}"))
    else:
        lines.append("snapshot     (none: these examples were not made from a snapshot)")
    lines.append(row("examples", lin.examples))
    lines.append(row("statistics", lin.statistics))
    lines.append(row("schema", lin.schema, f"imported from {lin.schema_file}" if lin.schema_file else ""))
    found = mlmd.anomalies_of(lin.anomalies)
    lines.append(row("anomalies", lin.anomalies, "\n".join(f"{'':<13}{a}" for a in found).lstrip()
                     if found else "none found"))
    table = role_table.loads(_prop(lin.transform_graph, role_table.ARTIFACT_PROPERTY))
    lines.append(row("transform", lin.transform_graph, "\n".join(
        f"{'':<13}{line}" for line in role_table.format_table(table).splitlines()).lstrip()))
    lines.append(row("model", lin.model, f"code version {lin.code_version}\n{'':<13}trainer config "
                     + json.dumps(lin.trainer_config, sort_keys=True)))
    lines.append(row("evaluation", lin.evaluation))
    if lin.blessing is not None:
        ok = mlmd.properties(lin.blessing).get("blessed") == 1
        lines.append(row("blessing", lin.blessing, "blessed" if ok else "NOT blessed"))
    else:
        lines.append(row("blessing", None))
    for push in lin.pushes:
        p = mlmd.properties(push)
        lines.append(row("pushed", push, f"version {p.get('pushed_version')} -> {p.get('pushed_destination')}"))
    if not lin.pushes:
        lines.append("pushed       never")
    for predictions in lin.scored:
        lines.append(row("scored", predictions, scoring_keys.describe(mlmd.properties(predictions))))
    return "\n".join(lines)


def cmd_lineage(config: Config, ref: str) -> str:
    if not os.path.exists(config.pipeline.metadata_path):
        raise LineageError(f"no metadata store at {config.pipeline.metadata_path}: run the pipeline first")
    store = mlmd.open_store(config.pipeline.metadata_path)
    return format_lineage(trace(store, *find_model(store, ref, config.pipeline.serving_dir)))
