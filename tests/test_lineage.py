"""Lineage on a real run: from the pushed version back to the snapshot digest, and the digest in MLMD."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from components.data.snapshot.component import DatasetSnapshot
from pipeline.cli import main
from pipeline.runs.lineage import code_version, find_model, trace
from pipeline.runs.mlmd import open_store

pytestmark = pytest.mark.e2e
PENGUINS = Path(__file__).resolve().parent.parent / "data" / "penguins" / "penguins.csv"


def _expected_digest(config) -> str:
    """The source's bytes and the missing-value tokens it was read with."""
    sha = hashlib.sha256(PENGUINS.read_bytes()).hexdigest()
    tokens = json.dumps(sorted(config.data.missing_values))
    return hashlib.sha256(f"{sha}  penguins.csv\nmissing_values {tokens}\n".encode()).hexdigest()


def test_snapshot_digest_is_in_mlmd_and_examplegen_read_the_snapshot(safety_run):
    store = open_store(safety_run.config.pipeline.metadata_path)
    # Other tests add runs to the same store: look at this run's executions only.
    [example_gen] = store.get_executions_by_id([safety_run.summary.component("CsvExampleGen").execution_id])
    snapshot_run = safety_run.summary.component("Snapshot").execution_id
    [snapshot] = [a for e in store.get_events_by_execution_ids([snapshot_run]) if e.type == e.OUTPUT
                  for a in store.get_artifacts_by_id([e.artifact_id])
                  if a.type_id == store.get_artifact_type(DatasetSnapshot.TYPE_NAME).id]
    digest = snapshot.custom_properties["digest"].string_value
    assert digest == _expected_digest(safety_run.config) == safety_run.summary.snapshot_digest
    assert snapshot.custom_properties["rows"].int_value == 344
    assert f"data snapshot: {digest} (344 rows)" in safety_run.output
    data_dir = f"{safety_run.config.snapshots_root}/{digest}/data"
    # ExampleGen's input is that snapshot artifact (components/data/example_gen.py), read in its data dir.
    [read] = [e.artifact_id for e in store.get_events_by_execution_ids([example_gen.id]) if e.type == e.INPUT]
    assert read == snapshot.id and snapshot.custom_properties["snapshot_uri"].string_value + "/data" == data_dir
    # The snapshot holds the source with its NA cells emptied, everything else byte for byte.
    assert (Path(data_dir) / "penguins.csv").read_bytes() == PENGUINS.read_bytes().replace(b"NA", b"")


def test_lineage_of_the_pushed_version(safety_run, capsys):
    version = safety_run.summary.pushed_version
    root = ["--set", f"pipeline.root={safety_run.root}"]
    assert main(["lineage", version, *root]) == 0
    out = capsys.readouterr().out
    store = open_store(safety_run.config.pipeline.metadata_path)
    model, push = find_model(store, version, safety_run.config.pipeline.serving_dir)
    lin = trace(store, model, push)
    assert lin.digest == _expected_digest(safety_run.config)
    assert lin.trainer_config["train_steps"] == 200 and lin.trainer_config["seed"] == 42
    assert lin.code_version == code_version() and lin.code_version.split("-")[0] in out
    assert lin.schema_file.endswith("schema/penguins.pbtxt")
    assert lin.blessing.custom_properties["blessed"].int_value == 1
    assert [p.custom_properties["pushed_version"].string_value for p in lin.pushes] == [version]
    # Every step of the chain is printed, in order, with its artifact.
    labels = [line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert labels == ["snapshot", "examples", "statistics", "schema", "anomalies", "transform", "model",
                      "evaluation", "blessing", "pushed"]
    assert f"digest {lin.digest}  rows 344" in out and "none found" in out
    # Under the transform: how each column was read.
    assert re.search(r"\n {13}species +label +multiclass +\(from the config\)\n", out)
    assert re.search(r"\n {13}body_mass_g +numeric +z-score", out)
    assert f"version {version} -> {safety_run.summary.pushed_path}" in out
    assert json.dumps(lin.trainer_config, sort_keys=True) in out
    # The same model by its artifact id.
    assert main(["lineage", str(model.id), *root]) == 0
    assert f"digest {lin.digest}" in capsys.readouterr().out


def test_lineage_of_unknown_model_is_a_clear_error(safety_run, capsys):
    assert main(["lineage", "999999", "--set", f"pipeline.root={safety_run.root}"]) == 1
    assert "'999999' is neither a pushed version" in capsys.readouterr().err
