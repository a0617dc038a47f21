"""The drift gate's measurement and verdict on real TFDV statistics of derived spans (no pipeline run)."""

from __future__ import annotations

import pytest

from components.drift_gate import (
    DataDriftError,
    check,
    gated_features,
    measure,
    newest_statistics,
    with_comparators,
)
from pipeline.config import load_config, resolve
from pipeline.runs import span_data
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
