"""The drift gate's measurement and verdict on real TFDV statistics of derived spans (no pipeline run),
and the gate's executor finding its baseline in the serving directory."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from tfx.types import Channel, standard_artifacts

from components import training_record
from components.data.drift_gate import (
    SCHEMA,
    SNAPSHOT,
    DataDriftError,
    DriftGate,
    DriftGateExecutor,
    check,
    gated_features,
    measure,
    newest_frame,
    newest_statistics,
    roles_of,
    statistics_of,
    with_comparators,
)
from components.data.snapshot.component import DatasetSnapshot
from components.data.snapshot.store import DATA_DIR
from components.serving import serving_dir
from pipeline.config import load_config, resolve
from pipeline.local import span_data
from tests.conftest import CONFIG


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    """Statistics of span 1 (baseline), span 2 (same distribution) and span 3 (shifted)."""
    import tensorflow_data_validation as tfdv

    config = load_config(CONFIG)
    recipe = span_data.Recipe.from_config(config)
    drift = recipe.drift
    root = tmp_path_factory.mktemp("spans")
    span_data.write_spans(resolve("data/penguins/penguins.csv"), str(root / "data"), recipe, count=3, rows=170,
                          drift_at=3)
    stats = {n: newest_statistics(str(root), [f"span-{n}"]) for n in (1, 2, 3)}
    schema = tfdv.load_schema_text(resolve(config.data.schema_file))
    gated = gated_features(config.features.model_dump_json(), schema)
    return stats, schema, drift, config.drift_gate, gated


def _found(spans, newest: int, **per_feature):
    stats, schema, _, section, gated = spans
    return measure(stats[newest], stats[1], with_comparators(schema, gated, section.numeric_threshold,
                                                              section.categorical_threshold, per_feature))


def test_the_label_and_the_model_inputs_are_gated_by_their_role_not_the_rest(spans):
    _, _, _, _, gated = spans
    # configs/local.yaml: label species, four numbers, two categories; year is ignored.
    assert gated == {"species": "categorical", "island": "categorical", "sex": "categorical",
                     **dict.fromkeys(["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"],
                                     "numeric")}


def test_same_distribution_passes_with_every_feature_measured(spans):
    found = _found(spans, 2)
    *_, gated = spans
    assert {d.feature for d in found} == set(gated)
    assert not [d for d in found if d.drifted], found
    check(found, frozenset())


def test_a_shifted_span_is_stopped_naming_each_drifted_feature(spans):
    _, _, drift, _, _ = spans
    with pytest.raises(DataDriftError) as stopped:
        check(_found(spans, 3), frozenset())
    message = str(stopped.value)
    assert f"feature {drift.numeric}: Jensen-Shannon distance" in message
    assert f"feature {drift.categorical}: L-infinity distance" in message
    assert "drift_gate.accepted" in message


def test_per_feature_thresholds_and_an_accepted_drift(spans):
    _, _, drift, _, _ = spans
    found = _found(spans, 3, **{drift.numeric: 1.0})
    numeric = next(d for d in found if d.feature == drift.numeric)
    assert numeric.threshold == 1.0 and not numeric.drifted
    drifted = frozenset(d.feature for d in found if d.drifted)
    assert drift.categorical in drifted
    check(found, drifted)  # every drifted feature accepted after review: the run goes on
    with pytest.raises(DataDriftError, match=drift.categorical):
        check(found, drifted - {drift.categorical})


def test_thresholds_for_unknown_features_are_rejected(spans):
    _, schema, _, _, gated = spans
    with pytest.raises(ValueError, match=r"the model does not use: \['no_such'\]"):
        with_comparators(schema, gated, 0.3, 0.2, {"no_such": 0.1})
    with pytest.raises(ValueError, match=r"the model does not use: \['year'\]"):
        with_comparators(schema, gated, 0.3, 0.2, {"year": 0.1})


# The gate as a component: its baseline is the serving version's training-data record (components/training_record.py).

@pytest.fixture(scope="module")
def gate_world(tmp_path_factory, spans):
    """A snapshot dir with spans 1-3 (3 shifted), the schema as an artifact, span 1's statistics as StatisticsGen's."""
    import shutil

    stats, *_ = spans
    config = load_config(CONFIG)
    root = tmp_path_factory.mktemp("gate")
    span_data.write_spans(resolve("data/penguins/penguins.csv"), str(root / "snapshot" / DATA_DIR),
                          span_data.Recipe.from_config(config), count=3, rows=170, drift_at=3)
    (root / "schema").mkdir()
    shutil.copy(resolve(config.data.schema_file), root / "schema" / "schema.pbtxt")
    (root / "stats" / "Split-train").mkdir(parents=True)
    (root / "stats" / "Split-train" / training_record.STATISTICS_FILE).write_bytes(stats[1].SerializeToString())
    return config, root


def _version(base: Path, number: int, root: Path, record: bool) -> None:
    """A loadable version the way the Pusher leaves it: the record first (if any), then the version."""
    if record:
        training_record.write(str(base), number, statistics_uri=str(root / "stats"), model_uri="model",
                              spans=("span-1",), snapshot_digest="d" * 64, snapshot_rows=170)
    (base / str(number)).mkdir(parents=True)
    (base / str(number) / serving_dir.SAVED_MODEL).write_text("graph")


def _run_gate(gate_world, base: Path, spans: str, accepted: str = "", snapshot_uri: str = "") -> None:
    """The gate's executor on `snapshot_uri` (default gate_world's snapshot) against what serves in `base`."""
    config, root = gate_world
    snapshot = DatasetSnapshot()
    snapshot.set_string_custom_property("snapshot_uri", snapshot_uri or str(root / "snapshot"))
    snapshot.set_string_custom_property("spans", spans)
    schema = standard_artifacts.Schema()
    schema.uri = str(root / "schema")
    component = DriftGate(snapshot=Channel(type=DatasetSnapshot), schema=Channel(type=standard_artifacts.Schema),
                          serving_dir=str(base), features=config.features.model_dump_json(),
                          thresholds=config.drift_gate.as_json(), accepted=accepted)
    DriftGateExecutor().Do({SNAPSHOT: [snapshot], SCHEMA: [schema]}, {}, dict(component.exec_properties))


def test_the_gate_stops_drifted_data_against_the_serving_versions_record(gate_world, spans, tmp_path, caplog):
    _, _, drift, _, _ = spans
    _, root = gate_world
    base = tmp_path / "serving"
    caplog.set_level(logging.INFO)
    _version(base, 1000, root, record=True)
    with pytest.raises(DataDriftError) as stopped:
        _run_gate(gate_world, base, "span-2,span-3")
    assert f"feature {drift.numeric}: Jensen-Shannon distance" in str(stopped.value)
    assert f"feature {drift.categorical}: L-infinity distance" in str(stopped.value)
    assert "serving version 1000: spans span-1" in caplog.text
    # The same distribution passes; so does the shifted span once its drift is accepted after review.
    _run_gate(gate_world, base, "span-1,span-2")
    accepted = ",".join(re.findall(r"^  feature (\S+):", str(stopped.value), re.MULTILINE))
    assert drift.numeric in accepted.split(",")
    _run_gate(gate_world, base, "span-2,span-3", accepted=accepted)


def test_without_a_serving_version_or_its_record_the_gate_passes_saying_nothing_was_compared(
        gate_world, tmp_path, caplog):
    _, root = gate_world
    base = tmp_path / "serving"
    caplog.set_level(logging.INFO)
    _run_gate(gate_world, base, "span-2,span-3")  # first run: nothing serves
    assert f"no model serving in {base} yet; nothing to compare" in caplog.text
    assert training_record.serving_key(str(base)) == "no serving version"

    _version(base, 1000, root, record=True)
    key_with_record = training_record.serving_key(str(base))
    _version(base, 2000, root, record=False)  # pushed before records were kept: it serves now
    caplog.clear()
    _run_gate(gate_world, base, "span-2,span-3")
    assert "serving version 2000 has no training-data record" in caplog.text and "nothing to compare" in caplog.text
    # The local cache key follows what serves (components/training_record.py, ServingVersionDriver).
    assert key_with_record == "version 1000, record"
    assert training_record.serving_key(str(base)) == "version 2000, no record"


def test_the_driver_keys_the_local_cache_by_what_serves(gate_world, tmp_path):
    """TFX's launcher runs the driver before its cache lookup and keys the cache with its exec properties."""
    from tfx.orchestration.portable import data_types

    from components.training_record import SERVING_DIR, SERVING_VERSION, ServingVersionDriver

    _, root = gate_world
    base = tmp_path / "serving"

    def key() -> str:
        info = data_types.ExecutionInfo(exec_properties={SERVING_DIR: str(base)})
        return ServingVersionDriver(None).run(info).exec_properties[SERVING_VERSION].string_value

    assert key() == "no serving version"
    _version(base, 1000, root, record=True)
    assert key() == "version 1000, record"
    _version(base, 2000, root, record=False)
    assert key() == "version 2000, no record"


def test_unchanged_heavy_tailed_data_is_no_drift_though_its_train_split_alone_reads_as_drift(tmp_path, caplog):
    """Taxi's trip_miles has one trip of 1,710 miles among 15,002: a train split without it has histogram
    buckets 9x narrower, and Jensen-Shannon across those edges reads 0.71 (threshold 0.3) on the same data.
    The gate compares the newest rows with the serving version's rows, read the same way."""
    import shutil

    import numpy as np
    import pandas as pd
    import tensorflow_data_validation as tfdv

    config = load_config("configs/taxi.yaml")
    digest = "a" * 64
    store = tmp_path / "snapshots"
    (store / digest / DATA_DIR).mkdir(parents=True)
    shutil.copy(resolve("data/taxi/data.csv"), store / digest / DATA_DIR / "data.csv")
    rows = pd.read_csv(store / digest / DATA_DIR / "data.csv", keep_default_na=False, na_values=[""])
    train = rows[(np.random.default_rng(0).random(len(rows)) < 2 / 3) & (rows.trip_miles < rows.trip_miles.max())]
    (tmp_path / "stats" / "Split-train").mkdir(parents=True)
    (tmp_path / "stats" / "Split-train" / training_record.STATISTICS_FILE).write_bytes(
        tfdv.generate_statistics_from_dataframe(train).SerializeToString())
    base = tmp_path / "serving"
    training_record.write(str(base), 1000, statistics_uri=str(tmp_path / "stats"), model_uri="model",
                          snapshot_digest=digest, snapshot_rows=len(rows))
    (base / "1000").mkdir(parents=True)
    (base / "1000" / serving_dir.SAVED_MODEL).write_text("graph")

    (tmp_path / "schema").mkdir()
    shutil.copy(resolve(config.data.schema_file), tmp_path / "schema" / "schema.pbtxt")
    schema = tfdv.load_schema_text(resolve(config.data.schema_file))
    gated = with_comparators(schema, gated_features(config.features.model_dump_json(), schema),
                             config.drift_gate.numeric_threshold, config.drift_gate.categorical_threshold, {})
    newest = newest_statistics(str(store / digest), ())
    split_only = measure(newest, training_record.read(str(base), "1000").train_statistics(), gated)
    assert [d.feature for d in split_only if d.drifted], "the train split alone no longer reads as drift"

    caplog.set_level(logging.INFO)
    _run_gate((config, tmp_path), base, "", snapshot_uri=str(store / digest))
    assert f"baseline: the rows of snapshot {store / digest}" in caplog.text
    distances = re.findall(r"drift gate: \S+ \S+ distance ([0-9.]+)", caplog.text)
    assert distances and all(float(d) == 0 for d in distances), caplog.text


def test_the_newest_data_is_typed_as_example_gen_types_it(tmp_path):
    # pandas alone reads true/false cells as booleans, which TFDV counts as numbers: against the
    # serving model's StatisticsGen statistics (strings) every such column drifted, on the same data.
    from tensorflow_metadata.proto.v0 import statistics_pb2

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("flag,calls,fee,plan\ntrue,1,2.5,basic\nfalse,,3,pro\nTRUE,3,,basic\n")
    [dataset] = newest_statistics(str(tmp_path), ()).datasets
    kinds = {f.path.step[0]: statistics_pb2.FeatureNameStatistics.Type.Name(f.type) for f in dataset.features}
    assert kinds == {"flag": "STRING", "calls": "FLOAT", "fee": "FLOAT", "plan": "STRING"}


def test_ids_free_text_and_dates_are_not_gated_booleans_are(tmp_path):
    # New rows have new ids and new dates by nature: gating them would stop every retraining.
    import tensorflow_data_validation as tfdv

    from tests import messy_data

    messy_data.write(tmp_path / "data", messy_data.customers(300))
    frame = newest_frame(str(tmp_path), ())
    schema = tfdv.infer_schema(statistics_of(frame))
    features = '{"label": "churned", "task": "binary", "positive_class": "yes"}'
    gated = gated_features(features, schema, roles_of(frame, schema, features))
    # support_calls: a count whose effect is a straight line, so a number (trainer/roles.py, read with the label).
    assert gated == {"churned": "categorical", "plan": "categorical", "region": "categorical",
                     "autopay": "categorical", "monthly_fee": "numeric", "support_calls": "numeric"}
