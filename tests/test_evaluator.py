"""components/evaluation/evaluator.py: TFMA's eager Keras metric updates run without autograph conversion, and the
Evaluator evaluates and blesses on the test split."""

from __future__ import annotations

import inspect
import json

import pytest
import tensorflow as tf
import tf_keras
from tfx.components.evaluator import executor as tfx_evaluator_executor

from components.evaluation.evaluator import BASELINE, CUSTOM_EXTRACTORS, EagerMetricsEvaluator, Executor
from components.evaluation.trivial import TRANSFORMED_EXAMPLES


class _WhereItRuns(tf_keras.metrics.Metric):
    """Records the file of the frame its update_state sees. Converted code calls
    everything, inspect.currentframe too, through autograph's converted_call, so
    the frame is then autograph's, not this file's."""

    def __init__(self):
        super().__init__(name="where_it_runs")
        self.total = self.add_weight(name="total", initializer="zeros")
        self.files: list[str] = []

    def update_state(self, values):
        self.files.append(inspect.currentframe().f_code.co_filename)
        if tf.reduce_sum(values) > 0:  # Python control flow on a tensor: what autograph would rewrite
            self.total.assign_add(tf.reduce_sum(values))

    def result(self):
        return self.total


def test_tf_keras_converts_an_eager_metric_update_by_default():
    """The cost the executor avoids: without a status, tf_keras transpiles update_state."""
    metric = _WhereItRuns()
    metric.update_state(tf.constant([1.0, 2.0]))
    assert metric.files[-1] != __file__ and "autograph" in metric.files[-1]
    assert float(metric.result()) == 3.0


def test_executor_runs_tfx_evaluator_with_metric_updates_unconverted(monkeypatch):
    metric = _WhereItRuns()
    seen = {}

    def tfx_do(self, input_dict, output_dict, exec_properties):  # stands in for TFMA's combiners
        metric.update_state(tf.constant([1.0, 2.0]))
        seen["args"] = (input_dict, output_dict, exec_properties)

    monkeypatch.setattr(tfx_evaluator_executor.Executor, "Do", tfx_do)
    Executor().Do({"in": []}, {"out": []}, {"p": 1})
    assert seen["args"] == ({"in": []}, {"out": []},
                            {"p": 1, CUSTOM_EXTRACTORS: "components.evaluation.eval_extractors.custom_extractors"})
    assert metric.files == [__file__]
    assert float(metric.result()) == 3.0


def test_component_keeps_the_evaluator_interface_with_this_executor():
    """TFX's Evaluator spec, every input, parameter and output kept, plus Transform's output (the trivial model's
    labels), its graph and the slice plan (components/evaluation/slicing.py)."""
    tfx_spec = tfx_evaluator_executor.standard_component_specs.EvaluatorSpec
    assert EagerMetricsEvaluator.EXECUTOR_SPEC.executor_class is Executor
    ours = EagerMetricsEvaluator.SPEC_CLASS
    assert issubclass(ours, tfx_spec) and ours.OUTPUTS == tfx_spec.OUTPUTS
    assert set(ours.INPUTS) - set(tfx_spec.INPUTS) == {TRANSFORMED_EXAMPLES, "transform_graph"}
    assert ours.INPUTS.items() >= tfx_spec.INPUTS.items()
    assert set(ours.PARAMETERS) - set(tfx_spec.PARAMETERS) == {"slicing"}


def _metrics_records(evaluation_uri: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every slice's metric keys and values as written (MetricsForSlice protos), in a stable order."""
    import glob

    from tensorflow_model_analysis.proto import metrics_for_slice_pb2

    records = []
    for path in sorted(glob.glob(f"{evaluation_uri}/metrics-*")):
        for raw in tf.data.TFRecordDataset(path):
            m = metrics_for_slice_pb2.MetricsForSlice.FromString(raw.numpy())
            records.append((str(m.slice_key), sorted((str(kv.key), str(kv.value))
                                                     for kv in m.metric_keys_and_values)))
    return sorted(records)


@pytest.mark.parametrize("baseline, sliced", [("none", False), ("candidate", False), ("candidate", True)])
def test_dropping_features_before_unbatching_keeps_every_metric_and_the_blessing(pipeline_run, tmp_path, baseline,
                                                                                sliced):
    """Ours (features dropped before TFMA unbatches) and TFX's own executor on the run's
    Evaluator inputs: the same metrics, to the last digit, and the same blessing. With the
    candidate as its own baseline, the two-model path (baseline and diff metrics, change
    thresholds) is compared too; sliced, ours with the shipped config's slice plan (every feature dropped but the
    slices' columns) and TFX's with the eval config that plan makes, every slice's metrics compared."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format
    from tfx.types import standard_component_specs as specs

    from bench.evaluator_bench import evaluator_inputs, run_executor
    from components.evaluation import slicing
    from components.evaluation.eval_extractors import DROP_STAGE, custom_extractors
    from components.splits import TEST
    from pipeline.dag.slices import slice_plan

    config, summary, _ = pipeline_run
    [evaluator] = [c for c in summary.components if c.name == "Evaluator"]
    inputs = evaluator_inputs(config.pipeline.metadata_path, evaluator.execution_id)
    inputs[BASELINE] = [] if baseline == "none" else list(inputs["model"])
    ours_extra, theirs_extra = {}, {}
    if sliced:
        plan = slice_plan(config)
        prepared, record = slicing.prepare(slicing.SlicePlan.from_json(plan),
                                           json_format.MessageToJson(_shipped_eval_config()), inputs,
                                           {specs.EXAMPLE_SPLITS_KEY: json.dumps([TEST])})
        assert [s["columns"] for s in record.slices] == [["island"], ["sex"]]
        ours_extra, theirs_extra = {slicing.SLICING_KEY: plan}, {specs.EVAL_CONFIG_KEY: prepared}
    ours = run_executor(Executor, inputs, config, str(tmp_path / "ours"), ours_extra)
    theirs = run_executor(tfx_evaluator_executor.Executor, inputs, config, str(tmp_path / "theirs"), theirs_extra)
    assert ours == theirs and ours["blessed"] == ["BLESSED"]
    assert len(_metrics_records(str(tmp_path / "ours" / "evaluation"))) == (6 if sliced else 1)
    assert ours["metrics"]["example_count"] > 0
    assert _metrics_records(str(tmp_path / "ours" / "evaluation")) == \
        _metrics_records(str(tmp_path / "theirs" / "evaluation"))
    ok = [tfma.load_validation_result(str(tmp_path / side / "evaluation")).validation_ok for side in ("ours", "theirs")]
    assert ok == [True, True]
    # The comparison is of something: our extractors drop the features right before unbatching.
    eval_config = tfma.utils.update_eval_config_with_defaults(_shipped_eval_config(), has_baseline=False,
                                                              rubber_stamp=True)
    model = tfma.default_eval_shared_model(
        eval_saved_model_path=f"{inputs['model'][0].uri}/Format-Serving", eval_config=eval_config)
    names = [x.stage_name for x in custom_extractors(model, eval_config, None)]
    assert names[names.index(DROP_STAGE) + 1] == tfma.extractors.unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME


def _shipped_eval_config():
    from pipeline.config import load_config
    from pipeline.dag.evaluation import eval_config

    return eval_config(load_config("configs/local.yaml"))


def test_executor_hands_tfx_our_extractors(monkeypatch):
    from tfx.components.util import udf_utils

    seen = {}
    monkeypatch.setattr(tfx_evaluator_executor.Executor, "Do",
                        lambda self, i, o, exec_properties: seen.update(exec_properties))
    Executor().Do({}, {}, {"eval_config": "{}"})
    # How TFX's executor looks the function up (tfx/components/util/udf_utils.py get_fn).
    found = udf_utils.try_get_fn(seen, "custom_extractors")  # a reloaded module's: compare by name
    assert (found.__module__, found.__name__) == ("components.evaluation.eval_extractors", "custom_extractors")
    assert udf_utils.try_get_fn(seen, "custom_eval_shared_model") is None


def test_only_the_slices_columns_are_kept_and_a_query_key_keeps_every_feature():
    import tensorflow_model_analysis as tfma

    from components.evaluation.eval_extractors import _drop_unused, features_unused, slice_columns

    shipped = _shipped_eval_config()
    assert features_unused(shipped) and slice_columns(shipped) == set()
    by_island = tfma.EvalConfig()
    by_island.CopyFrom(shipped)
    by_island.slicing_specs.append(tfma.SlicingSpec(feature_keys=["island"]))
    by_island.cross_slicing_specs.append(tfma.CrossSlicingSpec(
        baseline_spec=tfma.SlicingSpec(), slicing_specs=[tfma.SlicingSpec(feature_values={"sex": "male"})]))
    assert features_unused(by_island) and slice_columns(by_island) == {"island", "sex"}
    batch = {tfma.constants.FEATURES_KEY: {"island": 1, "sex": 2, "bill_length_mm": 3},
             tfma.constants.INPUT_KEY: b"...", tfma.constants.LABELS_KEY: 4}
    assert _drop_unused(batch, frozenset(slice_columns(by_island))) == {
        tfma.constants.FEATURES_KEY: {"island": 1, "sex": 2}, tfma.constants.LABELS_KEY: 4}
    assert _drop_unused(batch, frozenset()) == {tfma.constants.LABELS_KEY: 4}
    by_query = tfma.EvalConfig()
    by_query.CopyFrom(shipped)
    by_query.metrics_specs[0].query_key = "island"
    assert not features_unused(by_query)
def test_it_blesses_on_the_test_split_and_scores_the_trivial_model_on_the_same_rows(pipeline_run):
    """The shared run's evaluation: on the test split, which the Trainer's eval split does not overlap; its row
    count is the test split's; the trivial model's accuracy is the train split's most frequent species' share of
    the test rows, counted here from ExampleGen's raw rows; Transform transformed the test split too."""
    from collections import Counter

    from bench import scoring
    from components.evaluation import trivial
    from components.splits import EVAL, TEST, TRAIN

    config, summary, console = pipeline_run
    evaluation = summary.output("Evaluator", "ModelEvaluation")
    assert evaluation.properties[trivial.SPLIT] == summary.eval_split == TEST
    root = config.pipeline.pipeline_root
    rows = {split: scoring.examples(root, split) for split in (TRAIN, EVAL, TEST)}
    serialized = {split: {r.SerializeToString(deterministic=True) for r in found} for split, found in rows.items()}
    assert serialized[EVAL] and serialized[TEST] and not serialized[EVAL] & serialized[TEST]
    assert summary.metrics["example_count"] == len(rows[TEST])
    species = {split: [scoring.value(r, "species") for r in found] for split, found in rows.items()}
    [(majority, _)] = Counter(species[TRAIN]).most_common(1)
    # MLMD's SQLite store keeps 6 significant digits of a double property.
    assert summary.trivial_metric == pytest.approx(species[TEST].count(majority) / len(rows[TEST]), rel=5e-6)
    assert not summary.trivial_sets_the_bar  # configs/local.yaml's lower_bound 0.9 is stricter
    assert summary.metrics["sparse_categorical_accuracy"] > summary.trivial_metric
    transformed = summary.output("Transform", "Examples")
    assert sorted(json.loads(transformed.properties["split_names"])) == sorted([TRAIN, EVAL, TEST])
    # Each number says its split: the exported step's on eval, the Evaluator's on test.
    assert f"(eval accuracy {summary.exported.value:.4f};" in console
    assert f"test accuracy: {summary.metrics['sparse_categorical_accuracy']:.4f} (trivial model " in console
    assert f"test examples: {len(rows[TEST])}" in console
