"""The drift gate's measurement and verdict on real TFDV statistics of derived spans (no pipeline run)."""

from __future__ import annotations

import pytest

from components.drift_gate import DataDriftError, check, measure, newest_statistics, with_comparators
from pipeline.config import load_config, resolve
from pipeline.runs import span_data
from tests.conftest import CONFIG


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    """Statistics of span 1 (baseline), span 2 (same distribution) and span 3 (shifted)."""
    import tensorflow_data_validation as tfdv

    config = load_config(CONFIG)
    recipe = span_data.Recipe.from_schema(resolve(config.data.schema_file), label="species")
    drift = recipe.drift
    root = tmp_path_factory.mktemp("spans")
    span_data.write_spans(resolve("data/penguins/penguins.csv"), str(root / "data"), recipe, count=3, rows=170,
                          drift_at=3)
    stats = {n: newest_statistics(str(root), [f"span-{n}"]) for n in (1, 2, 3)}
    schema = tfdv.load_schema_text(resolve(config.data.schema_file))
    return stats, schema, drift, config.drift_gate


def _found(spans, newest: int, **per_feature):
    stats, schema, _, section = spans
    return measure(stats[newest], stats[1], with_comparators(schema, section.numeric_threshold,
                                                              section.categorical_threshold, per_feature))


def test_same_distribution_passes_with_every_feature_measured(spans):
    found = _found(spans, 2)
    stats, schema, _, _ = spans
    assert {d.feature for d in found} == {f.name for f in schema.feature}
    assert not [d for d in found if d.drifted], found
    check(found, frozenset())


def test_a_shifted_span_is_stopped_naming_each_drifted_feature(spans):
    _, _, drift, _ = spans
    with pytest.raises(DataDriftError) as stopped:
        check(_found(spans, 3), frozenset())
    message = str(stopped.value)
    assert f"feature {drift.numeric}: Jensen-Shannon distance" in message
    assert f"feature {drift.categorical}: L-infinity distance" in message
    assert "drift_gate.accepted" in message


def test_per_feature_thresholds_and_an_accepted_drift(spans):
    _, _, drift, _ = spans
    found = _found(spans, 3, **{drift.numeric: 1.0})
    numeric = next(d for d in found if d.feature == drift.numeric)
    assert numeric.threshold == 1.0 and not numeric.drifted
    drifted = frozenset(d.feature for d in found if d.drifted)
    assert drift.categorical in drifted
    check(found, drifted)  # every drifted feature accepted after review: the run goes on
    with pytest.raises(DataDriftError, match=drift.categorical):
        check(found, drifted - {drift.categorical})


def test_thresholds_for_unknown_features_are_rejected(spans):
    _, schema, _, _ = spans
    with pytest.raises(ValueError, match=r"not in the schema: \['no_such'\]"):
        with_comparators(schema, 0.3, 0.2, {"no_such": 0.1})
