"""The Evaluator's slices and slice gates (components/evaluation/slicing.py, slice_counts.py; pipeline/dag/slices.py;
pipeline/runs/slices.py), on small inputs: the config's checks, the counts against TFMA's own slicer, the eval config
TFMA gets, and TFMA's own validator applying it."""

from __future__ import annotations

import json
import os
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.evaluators import metrics_validator
from tensorflow_model_analysis.metrics import metric_types
from tensorflow_model_analysis.proto import metrics_for_slice_pb2
from tensorflow_model_analysis.slicer import slicer_lib
from tfx.types import standard_artifacts, standard_component_specs

from components.errors import SliceConfigError, SliceCountMismatch
from components.evaluation import slice_counts, slicing
from pipeline.config import load_config
from pipeline.dag.evaluation import eval_config
from pipeline.dag.slices import slice_plan
from pipeline.data.checks import check_features, check_slices
from pipeline.errors import ConfigError
from pipeline.runs import slices as slice_results
from trainer import role_table

PENGUINS = "configs/local.yaml"


@pytest.mark.parametrize("override, message", [
    ("evaluator.slices=[[]]", "evaluator.slices[0] is an empty list"),
    ("evaluator.slices=[[a, b, c, d]]", "crosses 4 columns; at most 3"),
    ("evaluator.slices=[[island, island]]", "names a column twice"),
    ("evaluator.slices=[island, [sex, island], [island, sex]]", "evaluator.slices[2] repeats the slice"),
    ("evaluator.slices=['a:b']", "'a:b' is not a column name"),
    ("evaluator.slice_min_examples=0", "greater than or equal to 1"),
    ("evaluator.slice_max_regression=-0.1", "greater than or equal to 0"),
    ("evaluator.auto_slice_max_values=1", "greater than or equal to 2"),
])
def test_bad_slice_settings_are_rejected_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(PENGUINS, [override])


def test_slice_bounds_must_be_ordered_and_within_the_metrics_range():
    with pytest.raises(ConfigError, match="slice_lower_bound 0.9 is above slice_upper_bound 0.5"):
        load_config(PENGUINS, ["evaluator.slice_lower_bound=0.9", "evaluator.slice_upper_bound=0.5"])
    with pytest.raises(ConfigError, match=r"evaluator.slice_lower_bound: 2.0 is outside \[0, 1\]"):
        check_features(load_config(PENGUINS, ["evaluator.slice_lower_bound=2"]))


def test_configured_slices_must_be_columns_and_not_the_label(tmp_path):
    config = load_config(PENGUINS, ["evaluator.slices=[island, [island, sexx]]"])
    with pytest.raises(ConfigError, match=r"evaluator.slices\[1\]: 'sexx' is not a column of the data; did you mean "
                                          r"'sex'\?"):
        check_features(config)  # against the curated schema
    with pytest.raises(ConfigError, match=r"evaluator.slices\[0\]: 'species' is the label"):
        check_slices(load_config(PENGUINS, ["evaluator.slices=[species]"]), ["species", "island"])
    # A column the model does not use (features.ignore) is a fine slice: the examples carry it.
    check_features(load_config(PENGUINS, ["evaluator.slices=[year, [island, sex]]"]))


def _example(**cells) -> bytes:
    ex = tf.train.Example()
    for name, values in cells.items():
        feature = ex.features.feature[name]
        for v in values:
            if isinstance(v, str):
                feature.bytes_list.value.append(v.encode())
            elif isinstance(v, float):
                feature.float_list.value.append(v)
            else:
                feature.int64_list.value.append(v)
    return ex.SerializeToString()


# Single values, an empty cell, a missing column, several values in one cell, ints and floats.
ROWS = [dict(region=["north"], plan=[1], score=[0.1]), dict(region=["north"], plan=[2], score=[0.1]),
        dict(region=["south"], plan=[1], score=[0.25]), dict(region=[], plan=[2]), dict(plan=[1], score=[0.1]),
        dict(region=["east", "west", "east"], plan=[3], score=[0.5]), dict(region=["Zürich"], plan=[3])]


def _tfma_keys(rows, specs) -> Counter:
    """The slice keys TFMA's own slicer makes of each example's features, as TFMA's extracts hold them."""
    found = Counter()
    for row in rows:
        features = {k: np.array([v.encode() if isinstance(v, str) else v for v in vs],
                                dtype=object if vs and isinstance(vs[0], str) else np.float32
                                if vs and isinstance(vs[0], float) else np.int64) for k, vs in row.items()}
        found.update(slicer_lib.get_slices_for_features_dicts(
            [], features, [slicer_lib.SingleSliceSpec(columns=s) for s in specs]))
    return found


def test_counts_are_tfmas_slice_keys():
    from tfx_bsl.coders import example_coder

    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch([_example(**r) for r in ROWS])
    specs = [["region"], ["plan"], ["score"], ["plan", "region"]]
    counts = slice_counts.count([batch], specs, numeric_range="score")
    ours = Counter({key: n for tally in counts.slices.values() for key, n in tally.items()})
    assert ours == _tfma_keys(ROWS, specs)
    assert ours[(("region", "east"),)] == 1 and ours[(("region", "Zürich"),)] == 1
    assert ours[(("plan", 3), ("region", "west"))] == 1
    assert counts.rows == len(ROWS) and (counts.low, counts.high) == (pytest.approx(0.1), 0.5)


def test_a_column_with_too_many_values_stops_being_counted():
    from tfx_bsl.coders import example_coder

    rows = [_example(city=[f"c{i}"], region=["north" if i % 2 else "south"]) for i in range(30)]
    batches = [example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(rows[i:i + 10]) for i in (0, 10, 20)]
    counts = slice_counts.count(batches, [["city"], ["region"], ["nowhere"]], limited=["city", "region"], limit=5)
    assert counts.too_many == {"city": 10} and ("city",) not in counts.slices
    assert counts.values("region") == 2 and counts.absent == {"nowhere"}


def _examples(tmp_path, split: str, rows: list[dict]) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = json.dumps(["train", split])
    os.makedirs(f"{examples.uri}/Split-{split}")
    with tf.io.TFRecordWriter(f"{examples.uri}/Split-{split}/data.gz", options="GZIP") as w:
        for row in rows:
            w.write(_example(**row))
    return examples


def _graph(table: list[dict]) -> standard_artifacts.TransformGraph:
    graph = standard_artifacts.TransformGraph()
    graph.set_string_custom_property(role_table.ARTIFACT_PROPERTY, role_table.dumps(table))
    return graph


ROLES = [{"column": "bought", "role": "label", "encoding": "", "why": ""},
         {"column": "region", "role": "categorical", "encoding": "", "why": ""},
         {"column": "city", "role": "categorical", "encoding": "", "why": ""},
         {"column": "member", "role": "boolean", "encoding": "", "why": ""},
         {"column": "country", "role": "categorical", "encoding": "", "why": ""},
         {"column": "x1", "role": "numeric", "encoding": "", "why": ""}]


def _shop_rows(n_west: int = 40, n_east: int = 5) -> list[dict]:
    rows = [dict(region=["west"], city=[f"c{i}"], member=[i % 2], country=["nl"], x1=[0.5], bought=["yes"])
            for i in range(n_west)]
    return rows + [dict(region=["east"], city=["e"], member=[1], country=["nl"], x1=[1.5], bought=["no"])] * n_east


def _binary_config(*overrides: str):
    return load_config(None, ["features.label=bought", "features.task=binary", "features.positive_class='yes'",
                              "evaluator.lower_bound=0.7", *overrides])


def _prepare(tmp_path, config, rows, split="eval"):
    plan = slicing.SlicePlan.from_json(slice_plan(config))
    inputs = {standard_component_specs.EXAMPLES_KEY: [_examples(tmp_path, split, rows)],
              slicing.TRANSFORM_GRAPH_KEY: [_graph(ROLES)]}
    splits = json.dumps([split]) if split != "eval" else "null"
    prepared, record = slicing.prepare(plan, json_format.MessageToJson(eval_config(config)), inputs,
                                       {standard_component_specs.EXAMPLE_SPLITS_KEY: splits})
    return json_format.Parse(prepared, tfma.EvalConfig()), record


def test_auto_slices_are_the_categorical_and_boolean_columns_with_few_values(tmp_path):
    prepared, record = _prepare(tmp_path, _binary_config("evaluator.auto_slice_max_values=5"), _shop_rows(),
                                split="test")
    assert record.splits == ["test"] and record.rows == 45
    assert [(s["columns"], s["source"], s["values"]) for s in record.slices] == [
        (["region"], "auto", 2), (["member"], "auto", 2)]
    assert {tuple(x["columns"]): x["why"] for x in record.left_out} == {
        ("city",): "more than evaluator.auto_slice_max_values (5) values",
        ("country",): "one value at most: the overall slice already"}
    assert [s.feature_keys for s in prepared.slicing_specs] == [[], ["region"], ["member"]]
    # No slice bound: no per-slice threshold on any slice but the overall one.
    [auc] = [m for m in prepared.metrics_specs[0].metrics if m.class_name == "AUC"]
    assert [list(t.slicing_specs) for t in auc.per_slice_thresholds] == [[tfma.SlicingSpec()]]
    assert not auc.HasField("threshold") and record.gated_keys() == set()


def test_configured_slices_and_their_gates_name_exactly_the_slices_with_enough_examples(tmp_path):
    config = _binary_config("evaluator.slices=[region, [region, member]]", "evaluator.slice_lower_bound=0.6",
                            "evaluator.slice_max_regression=0.05", "evaluator.slice_min_examples=10")
    prepared, record = _prepare(tmp_path, config, _shop_rows())
    assert [s["source"] for s in record.slices] == ["config", "config"]
    assert record.gated_keys() == {(("region", "west"),), (("member", 0), ("region", "west")),
                                   (("member", 1), ("region", "west"))}
    [auc] = [m for m in prepared.metrics_specs[0].metrics if m.class_name == "AUC"]
    overall, gates = auc.per_slice_thresholds
    assert overall.threshold.value_threshold.lower_bound.value == 0.7
    assert gates.threshold.value_threshold.lower_bound.value == 0.6
    assert gates.threshold.change_threshold.absolute.value == pytest.approx(-0.05)
    assert sorted(sorted(s.feature_values.items()) for s in gates.slicing_specs) == [
        [("member", "0"), ("region", "west")], [("member", "1"), ("region", "west")], [("region", "west")]]


def test_tfmas_validator_gates_big_slices_only_and_the_overall_bound_stays_overall(tmp_path):
    """TFMA's own validator (what the Evaluator blesses by) on the eval config prepare() made."""
    config = _binary_config("evaluator.slices=[region]", "evaluator.slice_lower_bound=0.6",
                            "evaluator.slice_min_examples=10")
    prepared, _ = _prepare(tmp_path, config, _shop_rows())
    prepared = tfma.utils.update_eval_config_with_defaults(prepared, has_baseline=False, rubber_stamp=True)

    def check(key, auc, examples):
        metrics = {metric_types.MetricKey("auc"): auc, metric_types.MetricKey("example_count"): examples}
        return metrics_validator.validate_metrics((key, metrics), prepared)

    assert check((), 0.8, 45).validation_ok
    assert not check((), 0.65, 45).validation_ok  # the overall bound, 0.7
    assert check((("region", "west"),), 0.65, 40).validation_ok  # above the slice bound, below the overall one
    assert not check((("region", "west"),), 0.55, 40).validation_ok
    assert check((("region", "east"),), 0.1, 5).validation_ok  # 5 examples: reported, not gated
    failed = check((("region", "west"),), 0.55, 40)
    words = slice_results.describe_failures(failed, {(("region", "west"),): {
        "candidate": {"auc": 0.55, "example_count": 40.0}, "baseline": {}}})
    assert words == ["auc 0.5500 on the 40 examples of slice region=west, below evaluator.slice_lower_bound 0.6"]


def test_a_slice_column_no_example_has_is_an_error_naming_the_key(tmp_path):
    with pytest.raises(SliceConfigError, match=r"evaluator.slices names \['plan'\], which no example of the eval"):
        _prepare(tmp_path, _binary_config("evaluator.slices=[region, plan]"), _shop_rows())


def test_regression_calibration_spans_the_labels_range(tmp_path):
    config = load_config(None, ["features.label=x1", "features.task=regression", "evaluator.upper_bound=1"])
    prepared, _ = _prepare(tmp_path, config, _shop_rows())
    [calibration] = [m for m in prepared.metrics_specs[0].metrics if m.class_name == "CalibrationPlot"]
    assert json.loads(calibration.config) == {"num_buckets": slicing.CALIBRATION_BUCKETS["regression"],
                                              "left": pytest.approx(0.45), "right": pytest.approx(1.55)}


def test_counts_that_differ_from_tfmas_fail_the_evaluator(tmp_path):
    record = slicing.SliceRecord(plan={}, splits=["eval"], rows=45, counts=[[[["region", "west"]], 40]])
    out = tmp_path / "evaluation"
    out.mkdir()

    def write(count):
        m = metrics_for_slice_pb2.MetricsForSlice()
        m.slice_key.single_slice_keys.add(column="region", bytes_value=b"west")
        kv = m.metric_keys_and_values.add()
        kv.key.name = "example_count"
        kv.value.double_value.value = count
        with tf.io.TFRecordWriter(str(out / "metrics-00000-of-00001.tfrecord")) as w:
            w.write(m.SerializeToString())

    write(40)
    slicing.check_counts(record, str(out))
    write(39)
    with pytest.raises(SliceCountMismatch, match="region"):
        slicing.check_counts(record, str(out))
