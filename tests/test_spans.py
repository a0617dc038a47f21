"""Span layout: selection, layout errors, snapshots of exactly the chosen spans, span data for the simulation."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from components.data.snapshot import spans, store
from components.data.snapshot.component import SPANS, SnapshotExecutor
from pipeline.config import load_config
from pipeline.errors import ConfigError
from pipeline.local import span_data
from tests.conftest import CONFIG


def _outputs(snapshot) -> dict:
    """The Snapshot's outputs as TFX hands them to its executor: the DatasetSnapshot and the decision beside it."""
    from tfx.types import standard_artifacts

    from components.data.snapshot.component import NEW_DATA_KEY, SNAPSHOT_KEY

    decision = standard_artifacts.Integer()
    decision.uri = snapshot.uri.rstrip("/") + "-new_data"
    return {SNAPSHOT_KEY: [snapshot], NEW_DATA_KEY: [decision]}

def _spans(root: Path, *names: str, empty: tuple[str, ...] = ()) -> Path:
    for name in names:
        (root / name).mkdir(parents=True)
        if name not in empty:
            (root / name / "data.csv").write_text(f"a,b\n1,{name}\n")
    return root


def _names(chosen) -> list[str]:
    return [s.name for s in chosen]


def test_selections_on_numbered_spans(tmp_path):
    src = str(_spans(tmp_path, "span-1", "span-2", "span-3", "span-4", "span-5"))
    found = spans.list_spans(src)
    assert _names(found) == ["span-1", "span-2", "span-3", "span-4", "span-5"]
    assert _names(spans.select(found, "all", src)) == _names(found)
    assert _names(spans.select(found, "latest", src)) == ["span-5"]
    assert _names(spans.select(found, "window(2)", src)) == ["span-4", "span-5"]
    assert _names(spans.select(found, "window(9)", src)) == _names(found)  # fewer than k so far


def test_numbered_spans_sort_by_number_and_dated_by_date(tmp_path):
    assert _names(spans.list_spans(str(_spans(tmp_path / "n", "span-10", "span-9")))) == ["span-9", "span-10"]
    dated = spans.list_spans(str(_spans(tmp_path / "d", "2026-01-10", "2025-12-31")))
    assert _names(dated) == ["2025-12-31", "2026-01-10"]


@pytest.mark.parametrize("layout, selection, message", [
    ((("span-1", "span-2", "span-4"), ()), "all", r"\['span-3'\] are missing inside the selection all"),
    ((("span-1", "span-2", "span-3"), ("span-3",)), "latest", r"\['span-3'\] are empty"),
    ((("span-1", "notes"), ()), "all", r"\['notes'\] are not span directories"),
    ((("span-1", "2026-01-01"), ()), "all", "mixes span-<N> and YYYY-MM-DD"),
    (((), ()), "all", "no span directories"),
])
def test_layout_errors_name_the_directory(tmp_path, layout, selection, message):
    names, empty = layout
    src = str(_spans(tmp_path / "src", *names, empty=empty))
    (tmp_path / "src").mkdir(exist_ok=True)
    with pytest.raises(spans.SpanError, match=message):
        spans.select(spans.list_spans(src), selection, src)


def test_a_file_outside_the_spans_is_an_error(tmp_path):
    src = _spans(tmp_path, "span-1")
    (src / "stray.csv").write_text("a\n1\n")
    with pytest.raises(spans.SpanError, match="'stray.csv' is outside any span directory"):
        spans.list_spans(str(src))


@pytest.mark.parametrize("bad", ["window(0)", "window()", "last", "window(2"])
def test_config_rejects_bad_selections(bad):
    with pytest.raises(ConfigError, match="data.spans.*all, latest or window"):
        load_config(CONFIG, [f"data.spans={bad}"])


def test_window_2_of_four_spans_snapshots_exactly_spans_3_and_4(tmp_path):
    """The Snapshot step's executor, run as TFX runs it, on a source that gains a span between runs."""
    from components.data.snapshot.component import DatasetSnapshot, snapshot_dir

    src = _spans(tmp_path / "src", "span-1", "span-2", "span-3", "span-4")
    snapshot = DatasetSnapshot()
    snapshot.uri = str(tmp_path / "artifact")
    Path(snapshot.uri).mkdir()
    SnapshotExecutor().Do({}, _outputs(snapshot),
                          {"source_uri": str(src), "snapshots_root": str(tmp_path / "snaps"), SPANS: "window(2)"})
    assert snapshot.get_string_custom_property(SPANS) == "span-3,span-4"
    manifest = json.loads((Path(snapshot.uri) / store.MANIFEST).read_text())
    assert manifest["spans"] == ["span-3", "span-4"]
    assert sorted(f["path"] for f in manifest["files"]) == ["span-3/data.csv", "span-4/data.csv"]
    data_dir = Path(snapshot_dir(snapshot)) / store.DATA_DIR
    assert sorted(p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*.csv")) == [
        "span-3/data.csv", "span-4/data.csv"]


def test_span_data_resamples_and_drifts_from_the_schema(tmp_path):
    config = load_config(CONFIG)
    recipe = span_data.Recipe.from_config(config)
    drift = recipe.drift
    # From the features section: a numeric FLOAT input and a categorical input, never the label.
    assert drift.numeric in recipe.noisy and drift.numeric in {f.name for f in config.features.numeric}
    assert drift.categorical in {f.name for f in config.features.categorical}
    assert config.features.label not in {*recipe.noisy, drift.categorical} and "NA" in recipe.missing
    low, high = recipe.domains[drift.numeric]
    source = Path(__file__).parent.parent / "data" / "penguins" / "penguins.csv"
    dirs = span_data.write_spans(str(source), str(tmp_path), recipe, count=3, rows=200, drift_at=3)
    assert [d.name for d in dirs] == ["span-1", "span-2", "span-3"]

    def column(n, name):
        with open(tmp_path / f"span-{n}" / "data.csv", newline="") as f:
            return [r[name] for r in csv.DictReader(f)]

    def mean(values):
        numbers = [float(v) for v in values if v not in recipe.missing]
        return sum(numbers) / len(numbers)

    assert len(column(1, drift.numeric)) == 200
    assert 0.8 < mean(column(2, drift.numeric)) / mean(column(1, drift.numeric)) < 1.25
    assert 1.15 < mean(column(3, drift.numeric)) / mean(column(1, drift.numeric)) < 1.35
    # Still inside the schema's domain: the data gate must let it through to the drift gate.
    assert all(low <= float(v) <= high for n in (1, 2, 3) for v in column(n, drift.numeric)
               if v not in recipe.missing)
    common = max(set(column(1, drift.categorical)), key=column(1, drift.categorical).count)
    assert column(3, drift.categorical).count(common) < column(1, drift.categorical).count(common) / 2


def _serve(serving: Path, version: int, trained_on: tuple[str, ...], tmp_path: Path, snapshot_digest: str = "",
           training_key: str | None = None) -> None:
    """A loadable version with its training-data record, as the Pusher leaves it (components/training_record.py);
    trained with the training key a Snapshot without a training config and schema computes, unless given."""
    from components import training_record
    from components.data.snapshot import newness
    from components.serving.serving_dir import SAVED_MODEL

    stats = tmp_path / f"stats-{version}" / training_record.TRAIN_SPLIT
    stats.mkdir(parents=True)
    (stats / training_record.STATISTICS_FILE).write_bytes(b"")
    training_record.write(str(serving), version, str(stats.parent), "model", spans=trained_on,
                          snapshot_digest=snapshot_digest,
                          training_key=newness.training_key_of("", None) if training_key is None else training_key)
    (serving / str(version)).mkdir()
    (serving / str(version) / SAVED_MODEL).write_bytes(b"")


def test_the_snapshot_says_whether_a_span_is_new_to_the_serving_model(tmp_path):
    """data.skip_when_no_new_span: the property the DAG's condition reads (pipeline/dag/conditions.py), and the
    local cache key, which must change when a version starts serving."""
    from tfx.orchestration.portable import data_types

    from components.data.snapshot import newness
    from components.data.snapshot.component import (
        FINGERPRINT,
        SERVING_DIR,
        SKIP_WHEN_NO_NEW_SPAN,
        DatasetSnapshot,
        SnapshotDriver,
    )

    src, serving = _spans(tmp_path / "src", "span-1", "span-2", "span-3"), tmp_path / "serving"
    props = {"source_uri": str(src), "snapshots_root": str(tmp_path / "snaps"), SPANS: "window(2)",
             SERVING_DIR: str(serving), SKIP_WHEN_NO_NEW_SPAN: 1}

    def run(**changes) -> tuple[dict, str]:
        snapshot = DatasetSnapshot()
        snapshot.uri = str(tmp_path / "artifact")
        Path(snapshot.uri).mkdir(exist_ok=True)
        SnapshotExecutor().Do({}, _outputs(snapshot), {**props, **changes})
        key = SnapshotDriver(None).run(data_types.ExecutionInfo(exec_properties={**props, **changes}))
        return ({k: snapshot.get_custom_property(k) for k in newness.Newness(True).properties()},
                key.exec_properties[FINGERPRINT].string_value)

    nothing_serving, key = run()
    assert nothing_serving == {"new_span": 1, "newest_span": "span-3", "serving_version": "", "serving_spans": "",
                               "changed_spans": "", "nothing_new": ""}
    _serve(serving, 1, ("span-2", "span-3"), tmp_path)
    seen, served_key = run()
    assert seen == {"new_span": 0, "newest_span": "span-3", "serving_version": "1", "serving_spans": "span-2,span-3",
                    "changed_spans": "", "nothing_new": "no new span: the newest in the source is span-3, and the "
                    "model serving now (version 1) was trained on span-2, span-3"}
    assert served_key != key  # a cached snapshot would still say new_span=1
    assert run(**{SKIP_WHEN_NO_NEW_SPAN: 0})[0]["new_span"] == 1
    _spans(src, "span-4")
    assert run()[0]["new_span"] == 1


def test_a_flat_source_is_new_until_a_version_trained_on_exactly_its_content_and_config_serves(tmp_path):
    """A flat source (no spans): the snapshot's content digest and the training key against the serving version's
    record; a one-byte change, another training config or an edited schema file make the run new again."""
    from components.data.snapshot.component import (
        NEW_DATA_KEY,
        SCHEMA_FILE,
        SERVING_DIR,
        SKIP_WHEN_NO_NEW_SPAN,
        TRAINING_CONFIG,
        TRAINING_KEY,
        DatasetSnapshot,
    )

    src, serving, schema = tmp_path / "src", tmp_path / "serving", tmp_path / "schema.pbtxt"
    src.mkdir()
    (src / "data.csv").write_text("a,b\n1,2\n3,4\n")
    schema.write_text("feature { name: 'a' }\n")
    props = {"source_uri": str(src), "snapshots_root": str(tmp_path / "snaps"), SERVING_DIR: str(serving),
             SKIP_WHEN_NO_NEW_SPAN: 1, TRAINING_CONFIG: "config-1", SCHEMA_FILE: str(schema)}
    runs = []

    def run(**changes):
        snapshot = DatasetSnapshot()
        snapshot.uri = str(tmp_path / f"artifact-{len(runs)}")
        Path(snapshot.uri).mkdir()
        outputs = _outputs(snapshot)
        SnapshotExecutor().Do({}, outputs, {**props, **changes})
        runs.append(snapshot)
        assert outputs[NEW_DATA_KEY][0].read() == snapshot.get_int_custom_property("new_span")
        return snapshot

    first = run()
    assert first.get_int_custom_property("new_span") == 1  # nothing serves yet
    _serve(serving, 1, (), tmp_path, snapshot_digest=first.get_string_custom_property("digest"),
           training_key=first.get_string_custom_property(TRAINING_KEY))
    same = run()
    assert same.get_int_custom_property("new_span") == 0
    assert "the source is unchanged" in same.get_string_custom_property("nothing_new")
    assert run(**{TRAINING_CONFIG: "config-2"}).get_int_custom_property("new_span") == 1
    schema.write_text("feature { name: 'b' }\n")
    assert run().get_int_custom_property("new_span") == 1
    schema.write_text("feature { name: 'a' }\n")
    assert run().get_int_custom_property("new_span") == 0
    (src / "data.csv").write_text("a,b\n1,2\n3,5\n")  # one byte
    assert run().get_int_custom_property("new_span") == 1
    # A record without a training key (pushed before keys were kept) can't be compared: new.
    (src / "data.csv").write_text("a,b\n1,2\n3,4\n")
    _serve(serving, 2, (), tmp_path, snapshot_digest=first.get_string_custom_property("digest"), training_key="")
    assert run().get_int_custom_property("new_span") == 1


def test_the_training_config_digest_follows_what_decides_the_model_only():
    from pipeline.dag.conditions import training_config_digest

    base = load_config(CONFIG)
    digest = training_config_digest(base, "code-1")
    assert digest == training_config_digest(load_config(CONFIG), "code-1")
    for setting in ("trainer.train_steps=700", "trainer.learning_rate=0.02", "data.train_buckets=4"):
        assert training_config_digest(load_config(CONFIG, [setting]), "code-1") != digest, setting
    assert training_config_digest(base, "code-2") != digest
    for setting in ("evaluator.lower_bound=0.5", "drift_gate.enabled=false", "pipeline.root=/elsewhere",
                    "beam.direct_num_workers=2"):
        assert training_config_digest(load_config(CONFIG, [setting]), "code-1") == digest, setting


# ---------------------------------------------------------------- complete spans only (data.span_ready_marker)

MARKER = spans.DEFAULT_READY_MARKER


def _mark(root: Path, *names: str) -> None:
    for name in names:
        (root / name / MARKER).write_bytes(b"")


class _Snapshotter:
    """The Snapshot step's executor, run as TFX runs it, with the ready marker and the newness check on."""

    def __init__(self, tmp_path: Path, src: Path, selection: str = "window(2)"):
        from components.data.snapshot.component import SERVING_DIR, SKIP_WHEN_NO_NEW_SPAN, SPAN_READY_MARKER

        self.tmp_path, self.serving = tmp_path, tmp_path / "serving"
        self.props = {"source_uri": str(src), "snapshots_root": str(tmp_path / "snaps"), SPANS: selection,
                      SPAN_READY_MARKER: MARKER, SERVING_DIR: str(self.serving), SKIP_WHEN_NO_NEW_SPAN: 1}
        self.runs = 0

    def run(self):
        from components.data.snapshot.component import DatasetSnapshot

        self.runs += 1
        snapshot = DatasetSnapshot()
        snapshot.uri = str(self.tmp_path / f"artifact-{self.runs}")
        Path(snapshot.uri).mkdir()
        SnapshotExecutor().Do({}, _outputs(snapshot), dict(self.props))
        return snapshot

    def serve(self, snapshot, version: int) -> None:
        """The Pusher published `version`, trained on `snapshot`, with its record (as components/pusher.py does)."""
        from components import training_record
        from components.data.snapshot.component import SPAN_DIGESTS, TRAINING_KEY, spans_of
        from components.serving.serving_dir import SAVED_MODEL

        stats = self.tmp_path / f"stats-{version}" / training_record.TRAIN_SPLIT
        stats.mkdir(parents=True)
        (stats / training_record.STATISTICS_FILE).write_bytes(b"")
        training_record.write(str(self.serving), version, str(stats.parent), "model", spans=spans_of(snapshot),
                              span_digests=json.loads(snapshot.get_string_custom_property(SPAN_DIGESTS)),
                              training_key=snapshot.get_string_custom_property(TRAINING_KEY))
        (self.serving / str(version)).mkdir(parents=True)
        (self.serving / str(version) / SAVED_MODEL).write_bytes(b"")


def test_a_span_without_its_marker_waits_and_is_reported_then_counts_once_marked(tmp_path):
    from components.data.snapshot.component import WAITING_SPANS
    from pipeline.runs.summary import RunSummary, format_summary

    src = _spans(tmp_path / "src", "span-1", "span-2", "span-3")
    _mark(src, "span-1", "span-2")  # span-3 is still being uploaded
    snapshotter = _Snapshotter(tmp_path, src)
    first = snapshotter.run()
    assert first.get_string_custom_property(SPANS) == "span-1,span-2"
    assert first.get_string_custom_property(WAITING_SPANS) == "span-3"
    manifest = json.loads((Path(first.uri) / store.MANIFEST).read_text())
    assert sorted(f["path"] for f in manifest["files"]) == ["span-1/data.csv", "span-2/data.csv"]  # no marker
    summary = RunSummary(run_id="r", components=[], metrics={}, baseline_metrics={}, blessed=None,
                         validation_failures=[], pushed_path=None, pushed_version=None, waiting_spans=("span-3",))
    assert "spans waiting for their ready marker, left out of this run: span-3" in \
        format_summary(summary, load_config(None, []))
    # Trained and served on span-1..2: the unfinished span-3 is nothing new yet.
    snapshotter.serve(first, 1)
    assert snapshotter.run().get_int_custom_property("new_span") == 0
    _mark(src, "span-3")
    marked = snapshotter.run()
    assert marked.get_string_custom_property(SPANS) == "span-2,span-3"
    assert marked.get_string_custom_property(WAITING_SPANS) == ""
    assert marked.get_int_custom_property("new_span") == 1


def test_a_span_that_grew_after_its_snapshot_is_new_again(tmp_path):
    src = _spans(tmp_path / "src", "span-1", "span-2")
    _mark(src, "span-1", "span-2")
    snapshotter = _Snapshotter(tmp_path, src)
    first = snapshotter.run()
    snapshotter.serve(first, 1)
    assert snapshotter.run().get_int_custom_property("new_span") == 0  # same files: nothing new
    (src / "span-2" / "late.csv").write_text("a,b\n2,late\n")  # a late file of an already seen span
    grown = snapshotter.run()
    assert grown.get_int_custom_property("new_span") == 1
    assert grown.get_string_custom_property("changed_spans") == "span-2"
    manifest = json.loads((Path(grown.uri) / store.MANIFEST).read_text())
    assert "span-2/late.csv" in {f["path"] for f in manifest["files"]}  # trained on this time
    # Changed bytes under the same names count too.
    snapshotter.serve(grown, 2)
    assert snapshotter.run().get_int_custom_property("new_span") == 0
    (src / "span-1" / "data.csv").write_text("a,b\n1,corrected\n")
    assert snapshotter.run().get_string_custom_property("changed_spans") == "span-1"


def test_waiting_spans_are_never_silently_dropped(tmp_path):
    src = _spans(tmp_path / "src", "span-1", "span-2", "span-3")
    _mark(src, "span-1", "span-3")  # span-2, inside the window, is still being written
    listed = spans.list_spans(str(src), marker=MARKER)
    assert [(s.name, s.ready) for s in listed] == [("span-1", True), ("span-2", False), ("span-3", True)]
    with pytest.raises(spans.SpanError, match=r"\['span-2'\] are missing.*have no _SUCCESS marker yet"):
        spans.select(listed, "window(3)", str(src), MARKER)
    none = _spans(tmp_path / "none", "span-1")
    with pytest.raises(spans.SpanError, match=r"no span is ready yet: \['span-1'\] have no _SUCCESS marker"):
        spans.select(spans.list_spans(str(none), marker=MARKER), "latest", str(none), MARKER)
    # Off (data.span_ready_marker: null): every span counts, as before.
    assert all(s.ready for s in spans.list_spans(str(src)))


def test_the_marker_on_gs(gcs_bucket):
    bucket = gcs_bucket.client.bucket(gcs_bucket.name)
    for name in ("src/span-1/data.csv", f"src/span-1/{MARKER}", "src/span-2/part-0.csv"):
        bucket.blob(name).upload_from_string(b"a,b\n1,2\n")
    listed = spans.list_spans(f"{gcs_bucket.uri}/src", gcs_bucket.client, marker=MARKER)
    assert [(s.name, s.files, s.ready) for s in listed] == [("span-1", 1, True), ("span-2", 1, False)]


def test_the_marker_setting(tmp_path):
    assert load_config(None, []).data.span_ready_marker == "_SUCCESS"
    assert load_config(None, ["data.span_ready_marker=null"]).data.span_ready_marker is None
    assert load_config(None, ["data.span_ready_marker=READY.txt"]).data.span_ready_marker == "READY.txt"
    for bad in ("a/b", "..", "/x"):
        with pytest.raises(ConfigError, match="span_ready_marker"):
            load_config(None, [f"data.span_ready_marker={bad}"])
    # The simulated spans are complete: each ends with its marker.
    config = load_config(CONFIG)
    penguins = Path(__file__).parent.parent / "data" / "penguins" / "penguins.csv"
    [written] = span_data.write_spans(str(penguins), str(tmp_path), span_data.Recipe.from_config(config),
                                      count=1, rows=5)
    assert sorted(p.name for p in written.iterdir()) == [MARKER, "data.csv"]
