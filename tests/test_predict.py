"""`python -m pipeline predict` on the shared run's pushed model: the predictions are serving_default's on the
same rows, bad rows are rejected by line and the rest scored, rows keep their order (docs/predict.md)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from components.bulk_inferrer import model_to_use
from components.data import csv_examples
from components.scoring import ledger
from components.scoring.columns import Columns, ColumnType
from components.scoring.rows import score_rows
from components.serving import serving_dir
from pipeline.cli import main
from pipeline.config import load_config
from pipeline.runs.mlmd import Reader, open_store
from pipeline.runs.report import render
from tests.conftest import CONFIG

PENGUINS = Path(__file__).resolve().parent.parent / "data" / "penguins" / "penguins.csv"
SCHEMA_TYPES = {"bill_length_mm": "float", "bill_depth_mm": "float", "flipper_length_mm": "int",
                "body_mass_g": "int", "island": "bytes", "sex": "bytes"}  # schema/penguins.pbtxt


def _client_example(row: dict[str, str], missing: set[str]) -> bytes:
    """A tf.Example as a TF Serving client builds one: each present input in its schema type, missing ones left out."""
    feature = {}
    for name, kind in SCHEMA_TYPES.items():
        cell = row[name]
        if cell == "" or cell in missing:
            continue
        feature[name] = (tf.train.Feature(float_list=tf.train.FloatList(value=[float(cell)])) if kind == "float" else
                         tf.train.Feature(int64_list=tf.train.Int64List(value=[int(cell)])) if kind == "int" else
                         tf.train.Feature(bytes_list=tf.train.BytesList(value=[cell.encode()])))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _predict(run, tmp_path: Path, source: Path, *args: str) -> int:
    return main(["predict", "--config", CONFIG, *[a for s in run.overrides() for a in ("--set", s)],
                 "--input", str(source), "--output", str(tmp_path / "out"), *args])


@pytest.mark.e2e
def test_predictions_are_serving_defaults_on_the_same_rows(finished_run, tmp_path, capsys):
    run = finished_run()
    version = Path(run.summary.pushed_path)
    assert _predict(run, tmp_path, PENGUINS.parent, "--format", "jsonl",
                    "--set", "predict.keep=[island,year]") == 0
    rows = list(csv.DictReader(PENGUINS.open()))
    got = [json.loads(line) for line in (tmp_path / "out" / "penguins.jsonl").read_text().splitlines()]
    assert [g["line"] for g in got] == list(range(2, len(rows) + 2))
    assert [(g["island"], g["year"]) for g in got] == [(r["island"], r["year"]) for r in rows]

    serve = tf.saved_model.load(str(version)).signatures["serving_default"]
    missing = set(run.config.data.missing_values)
    want = serve(examples=tf.constant([_client_example(r, missing) for r in rows]))
    classes = (version / "assets" / "species").read_text().split()
    assert [g["class_name"] for g in got] == [c.decode() for c in want["class_name"].numpy()]
    np.testing.assert_array_equal(
        np.array([[g[f"probability_{c}"] for c in classes] for g in got], np.float32), want["probabilities"].numpy())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["rows"], summary["scored"], summary["rejected"]) == (344, 344, 0)
    assert summary["model_version"] == version.name
    assert f"with model version {version.name}" in capsys.readouterr().out


@pytest.mark.e2e
def test_a_bad_cell_is_rejected_by_line_and_every_other_row_scored(finished_run, tmp_path):
    run = finished_run()
    lines = PENGUINS.read_text().splitlines()
    cells = lines[9].split(",")
    cells[5] = "heavy"  # body_mass_g, an INT in the schema
    lines[9] = ",".join(cells)
    lines[19] += ",extra"
    source = tmp_path / "in" / "penguins.csv"
    source.parent.mkdir()
    source.write_text("\n".join(lines) + "\n")
    assert _predict(run, tmp_path, source) == 0
    out = list(csv.DictReader((tmp_path / "out" / "penguins.csv").open()))
    assert [int(r["line"]) for r in out] == [n for n in range(2, len(lines) + 1) if n not in (10, 20)]
    assert [r["year"] for r in out] == [line.rsplit(",", 1)[1] for i, line in enumerate(lines[1:], 2)
                                        if i not in (10, 20)]
    assert all(r["class_name"] in ("Adelie", "Chinstrap", "Gentoo") for r in out)
    rejects = list(csv.DictReader((tmp_path / "out" / "rejects.csv").open()))
    assert [(r["file"], int(r["line"])) for r in rejects] == [(str(source), 10), (str(source), 20)]
    assert rejects[0]["reason"] == "body_mass_g: 'heavy' is not an integer"
    assert rejects[1]["reason"] == "9 cells, the header has 8"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["rows"], summary["scored"], summary["rejected"]) == (344, 342, 2)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["penguins.csv", "rejects.csv", "summary.json"]


@pytest.mark.e2e
def test_a_label_with_no_version_and_an_unknown_version_are_named(finished_run, tmp_path, capsys):
    run = finished_run()  # configs/local.yaml pushes directly: stable only, no canary
    assert _predict(run, tmp_path, PENGUINS, "--label", "canary") == 2
    assert "--label canary: no version serves under it" in capsys.readouterr().err
    assert _predict(run, tmp_path, PENGUINS, "--version", "7") == 2
    assert "--version 7: not a pushed version" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_a_version_pushed_before_it_recorded_its_inputs_needs_the_schema_file(finished_run, tmp_path, capsys):
    """Versions pushed before trainer/model_inputs.py kept the record: predict says what is missing and what to set,
    and reads them with data.schema_file as it always did."""
    import shutil

    from components.serving import model_config
    from trainer import model_inputs

    run = finished_run()
    old = load_config(CONFIG, [f"pipeline.root={tmp_path / 'root'}"])
    version = Path(old.pipeline.serving_dir) / Path(run.summary.pushed_path).name
    shutil.copytree(run.summary.pushed_path, version)
    Path(model_inputs.path(str(version))).unlink()
    model_config.write(old.pipeline.serving_dir, old.pipeline.name, model_config.Labels(stable=int(version.name)),
                       None)
    args = ["predict", "--config", CONFIG, "--set", f"pipeline.root={tmp_path / 'root'}", "--input", str(PENGUINS)]
    assert main([*args, "--output", str(tmp_path / "none"), "--set", "data.schema_file="]) == 2
    err = capsys.readouterr().err
    assert f"version {version.name} was pushed before versions recorded the columns they read" in err
    assert "model_inputs.json is missing), and the config has no data.schema_file: set it" in err
    assert main([*args, "--output", str(tmp_path / "out")]) == 0
    got = list(csv.DictReader((tmp_path / "out" / "penguins.csv").open()))
    assert len(got) == 344 and {g["class_name"] for g in got} <= {"Adelie", "Chinstrap", "Gentoo"}


def test_a_binary_class_id_gets_its_name_beside_it():
    from components.scoring.output import layout_of
    from components.scoring.rows import Chunk

    layout = layout_of({"class_id": [-1], "probability": [-1]}, ["id"], None, "csv", ("no", "yes"))
    assert layout.columns == ["line", "id", "class_id", "class_name", "probability"]
    chunk = Chunk(0, 0, [2, 3], [[b"a"], [b"b"]], [b"", b""], [])
    text = layout.lines(chunk, {"class_id": np.array([1, 0]), "probability": np.array([0.75, 0.25], np.float32)})
    assert text.decode() == "2,a,1,yes,0.75\n3,b,0,no,0.25\n"
    # Without names (a regression, an integer label), the layout is the signature's outputs alone.
    assert layout_of({"class_id": [-1], "probability": [-1]}, [], None, "csv").columns == [
        "line", "class_id", "probability"]


def test_line_numbers_count_the_lines_of_quoted_cells(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text('id,text\n1,plain\n2,"two\nlines"\n\n3,after\n')
    numbered = [(n, r) for numbers, records in csv_examples.numbered_records(str(path))
                for n, r in zip(numbers, records)]
    assert [(n, r) for n, r in numbered if r] == [(2, [b"1", b"plain"]), (3, [b"2", b"two\nlines"]),
                                                  (6, [b"3", b"after"])]


def test_each_kind_of_bad_row_is_named_and_the_rest_encoded():
    from tfx_bsl.coders import example_coder

    columns = Columns(("n", "x", "s"), {"n": ColumnType.INT, "x": ColumnType.FLOAT, "s": ColumnType.STRING},
                      frozenset({"s"}), ("id",), (b"NA",))
    records = [[b"a", b"1", b"0.5", b"u"], [b"b", b"1.5", b"1", b"u"], [b"c", b"NA", b"x", b"u"],
               [b"d", b"2", b"", b""], [b"e", b"99999999999999999999", b"1", b"u"], [b"f", b"3"],
               [b"g", b"", b"NA", b"v"]]
    chunk = score_rows(0, 0, list(range(2, 9)), records, 4, columns, [1, 2, 3], [0],
                       example_coder.RecordBatchToExamplesEncoder())
    assert chunk.rejects == [(3, "n: '1.5' is not an integer"), (4, "x: 'x' is not a number"),
                             (5, "s: is empty, and the model needs a value"), (6, "n: '99999999999999999999' is "
                                                                               "outside int64"),
                             (7, "2 cells, the header has 4")]
    assert (chunk.lines, chunk.keep) == ([2, 8], [[b"a"], [b"g"]])
    parsed = tf.io.parse_example(chunk.examples, {"n": tf.io.VarLenFeature(tf.int64),
                                                  "x": tf.io.VarLenFeature(tf.float32),
                                                  "s": tf.io.FixedLenFeature([], tf.string)})
    assert (parsed["n"].values.numpy().tolist(), parsed["n"].indices.numpy().tolist()) == ([1], [[0, 0]])
    assert parsed["x"].values.numpy().tolist() == [0.5]  # NA is missing, as in training
    assert parsed["s"].numpy().tolist() == [b"u", b"v"]


INFERENCE = "inference.input_dir=data/penguins"


@pytest.mark.e2e
def test_the_pipeline_scores_inference_input_dir_with_the_version_it_pushed(finished_run, capsys):
    run = finished_run(INFERENCE)  # the one shared run with an inference step
    version = run.summary.pushed_version
    predictions = run.summary.predictions
    assert run.summary.component("BulkInferrer").state == "ran"
    assert predictions.properties["model_version"] == version
    assert (predictions.properties["rows"], predictions.properties["scored"]) == (344, 344)
    assert "inference: scored 344 of 344 rows (0 rejected) of snapshot" in run.output
    assert f"with model version {version}" in run.output
    out = list(csv.DictReader(open(f"{predictions.uri}/penguins.csv")))
    assert [int(r["line"]) for r in out] == list(range(2, 346))
    # Lineage: the Predictions' producer read the inference snapshot and this run's push.
    store = open_store(run.config.pipeline.metadata_path)
    reader = Reader(store)
    inputs = reader.inputs(reader.producer(reader.artifact(predictions.id)))
    assert inputs["snapshot"][0].custom_properties["digest"].string_value == \
        predictions.properties["snapshot_digest"]
    assert inputs["pushed_model"][0].custom_properties["pushed_version"].string_value == version
    capsys.readouterr()
    assert main(["lineage", version, "--config", CONFIG, *[a for s in run.overrides() for a in ("--set", s)]]) == 0
    assert f"scored       artifact {predictions.id}  {predictions.uri}" in capsys.readouterr().out
    assert "Inference (inference.input_dir)" in render(run.summary, run.config.pipeline.name)


def test_a_span_is_scored_once_and_again_when_its_files_change(tmp_path):
    ledger_dir = str(tmp_path / "ledger")
    assert ledger.unscored({"span-1": "a", "span-2": "b"}, ledger_dir) == (["span-1", "span-2"], [])
    ledger.mark_scored(ledger_dir, {"span-1": "a", "span-2": "b"}, "7", "uri")
    assert ledger.unscored({"span-1": "a", "span-2": "changed", "span-3": "c"}, ledger_dir) == \
        (["span-2", "span-3"], ["span-1"])


def test_the_model_is_the_push_or_else_the_serving_one():
    from tfx.types import standard_artifacts

    pushed, serving = standard_artifacts.PushedModel(), standard_artifacts.Model()
    pushed.uri, serving.uri = "/push", "/serving"
    pushed.set_int_custom_property("pushed", 0)
    serving.set_int_custom_property("empty", 1)
    assert model_to_use(pushed, serving) is None
    serving.set_int_custom_property("empty", 0)
    serving.set_string_custom_property("serving_version", "5")
    assert model_to_use(pushed, serving) == ("5", "/serving/Format-Serving")
    pushed.set_int_custom_property("pushed", 1)
    pushed.set_string_custom_property("pushed_version", "6")
    assert model_to_use(pushed, serving) == ("6", "/push")


def test_dataflow_gets_the_pipelines_dataflow_args_and_gs_paths_only():
    from pipeline.config import load_config
    from pipeline.dag.beam import beam_pipeline_args
    from pipeline.errors import ConfigError
    from pipeline.predict import runner_args

    local = load_config(CONFIG)
    with pytest.raises(ConfigError, match="needs the config's dataflow section"):
        runner_args(local, "dataflow", "gs://b/in", "gs://b/out")
    vertex = load_config("configs/vertex.yaml")
    with pytest.raises(ConfigError, match="--input must be a gs:// URI"):
        runner_args(vertex, "dataflow", "/data/in", "gs://b/out")
    with pytest.raises(ConfigError, match="--output must be a gs:// URI"):
        runner_args(vertex, "dataflow", "gs://b/in", "out")
    args = runner_args(vertex, "dataflow", "gs://b/in", "gs://b/out")
    assert args == beam_pipeline_args(vertex) and "--runner=DataflowRunner" in args
    assert runner_args(vertex, "local", "/data/in", "out") == vertex.beam.args  # the beam section's runner


@pytest.mark.e2e
def test_the_bulk_inferrer_scores_only_the_spans_it_has_not_scored(finished_run, tmp_path):
    """The step's executor on a span source (Snapshot's executor makes the snapshot), with the shared run's push."""
    import shutil

    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
    from tfx.types import standard_artifacts

    from components.bulk_inferrer import Executor, Predictions
    from components.data.snapshot.component import DatasetSnapshot, SnapshotExecutor

    run = finished_run()
    header, *rows = PENGUINS.read_text().splitlines()
    source = tmp_path / "spans"
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "schema")
    Path(schema.uri).mkdir()
    shutil.copy(Path(CONFIG).resolve().parent.parent / "schema" / "penguins.pbtxt", Path(schema.uri) / "schema.pbtxt")
    pushed, serving = standard_artifacts.PushedModel(), standard_artifacts.Model()
    pushed.uri = run.summary.pushed_path
    pushed.set_int_custom_property("pushed", 1)
    pushed.set_string_custom_property("pushed_version", run.summary.pushed_version)
    serving.set_int_custom_property("empty", 1)

    def land(span: int, lines: list[str]) -> None:
        (source / f"span-{span}").mkdir(parents=True)
        (source / f"span-{span}" / "rows.csv").write_text("\n".join([header, *lines]) + "\n")
        (source / f"span-{span}" / "_SUCCESS").touch()

    def score(n: int) -> Predictions:
        snapshot, new_data, out = DatasetSnapshot(), standard_artifacts.Integer(), Predictions()
        snapshot.uri, new_data.uri, out.uri = (str(tmp_path / f"{what}-{n}") for what in ("snapshot", "new", "out"))
        Path(snapshot.uri).mkdir()
        Path(out.uri).mkdir()
        SnapshotExecutor().Do({}, {"snapshot": [snapshot], "new_data": [new_data]}, {
            "source_uri": str(source), "snapshots_root": str(tmp_path / "store"), "spans": "all",
            "span_ready_marker": "_SUCCESS", "missing_values": json.dumps(run.config.data.missing_values),
            "check_csv": 0})
        Executor(BaseBeamExecutor.Context(beam_pipeline_args=run.config.beam.args)).Do(
            {"snapshot": [snapshot], "schema": [schema], "pushed_model": [pushed], "serving_model": [serving]},
            {"predictions": [out]},
            {"features": run.config.features.model_dump_json(), "keep": "null", "format": "csv", "chunk_rows": 64,
             "missing_values": json.dumps(run.config.data.missing_values), "ledger_dir": str(tmp_path / "ledger")})
        return out

    land(1, rows[:100])
    land(2, rows[100:200])
    first = score(1)
    assert first.get_string_custom_property("spans") == "span-1,span-2"
    assert first.get_int_custom_property("scored") == 200
    assert first.get_string_custom_property("model_version") == run.summary.pushed_version
    assert len(list(csv.DictReader(open(f"{first.uri}/span-2/rows.csv")))) == 100
    land(3, [*rows[200:], rows[0] + ",one too many"])  # a ragged row: rejected by line, the rest scored
    second = score(2)
    assert second.get_string_custom_property("spans") == "span-3"
    assert second.get_string_custom_property("skipped_spans") == "span-1,span-2"
    assert second.get_int_custom_property("scored") == len(rows) - 200
    assert second.get_int_custom_property("rejected") == 1
    [reject] = list(csv.DictReader(open(f"{second.uri}/rejects.csv")))
    assert (int(reject["line"]), reject["reason"]) == (len(rows) - 200 + 2, "9 cells, the header has 8")
    assert not Path(f"{second.uri}/span-1").exists()


def test_the_vertex_backend_is_refused_as_not_implemented(tmp_path, capsys):
    args = ["predict", "--config", CONFIG, "--set", f"pipeline.root={tmp_path}", "--set", "predict.backend=vertex",
            "--input", str(PENGUINS), "--output", str(tmp_path / "out")]
    assert main(args) == 2
    assert "predict.backend: vertex (a Vertex BatchPredictionJob) is not implemented" in capsys.readouterr().err


def test_the_job_translates_for_dataflow_with_the_pipeline_image_as_the_workers_container():
    """DataflowRunner with Beam's own --dry_run (TestOptions): the job is built and translated, not submitted."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.portability.api import beam_runner_api_pb2

    from components.scoring.job import InputFile, build
    from components.scoring.output import Layout
    from pipeline.config import load_config
    from pipeline.predict import runner_args

    vertex = load_config("configs/vertex.yaml")
    pipeline = beam.Pipeline(options=PipelineOptions(
        [*runner_args(vertex, "dataflow", "gs://b/in", "gs://b/out"), "--dry_run=true"]))
    columns = Columns(("x",), {"x": ColumnType.FLOAT}, frozenset(), ("id",), (b"NA",))
    build(pipeline, [InputFile("gs://b/in/a.csv", ("id", "x"), "a")], columns, "gs://b/model/1",
          Layout(("id",), (("prediction", ("prediction",)),)), "gs://b/out/.parts", 4096)
    job = pipeline.run().job
    [environment] = job.proto_pipeline.components.environments.values()
    assert environment.urn == "beam:env:docker:v1"
    assert beam_runner_api_pb2.DockerPayload.FromString(environment.payload).container_image == \
        vertex.vertex.pipeline_image
    assert {"ReadAndEncode", "ServingDefault", "Write"} <= {
        t.unique_name.split("/")[0] for t in job.proto_pipeline.components.transforms.values()}
    assert str(job.proto.type) == "JOB_TYPE_BATCH"


def test_the_default_is_the_stable_version_and_a_label_picks_its_own(tmp_path):
    from components.serving import model_config
    from pipeline.config import load_config
    from pipeline.predict import choose_version

    config = load_config(CONFIG, [f"pipeline.root={tmp_path}"])
    base = config.pipeline.serving_dir
    for number in (1, 2, 3):  # 3 is the newest, pushed as a canary; 2 is stable
        (Path(base) / str(number)).mkdir(parents=True)
        (Path(base) / str(number) / serving_dir.SAVED_MODEL).write_text("graph")
    model_config.write(base, config.pipeline.name, model_config.Labels(stable=2, canary=3), None)
    assert choose_version(config, None, None).number == 2
    assert choose_version(config, None, "stable").number == 2
    assert choose_version(config, None, "canary").number == 3
    assert choose_version(config, 1, None).number == 1
