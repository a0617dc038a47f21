"""`make bench`'s quality part in small (bench/quality.py): the held-out split, the prepared table and its config,
the baselines on a real table of a few thousand rows, the figures, and the summary text. No pipeline run: the
scoring of a pushed model is tested on the shared run (tests/test_bench_quality_scoring.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench import baselines, quality, quality_data, quality_metrics, quality_report, quality_tables
from bench.quality_tables import ROW_KEY, TABLES
from pipeline.config import load_config


def test_held_out_share_is_a_tenth_by_key_alone():
    keys = pd.Series(range(1, 20_001))
    aside = quality_data.held_out(keys)
    assert 0.09 < aside.mean() < 0.11
    # The same key is on the same side whatever else the table holds, and in whatever order.
    subset = keys.iloc[::7].sample(frac=1, random_state=1)
    assert (quality_data.held_out(subset) == aside.loc[subset.index]).all()


def test_a_prepared_table_is_the_rows_minus_the_held_out_and_is_reused(tmp_path):
    table = TABLES["hpc_data"]
    prepared = quality_data.prepare(table, tmp_path)
    train, heldout = prepared.frames()
    source = quality_tables.load(table)
    assert (len(train), len(heldout)) == (prepared.rows, prepared.heldout_rows)
    assert len(train) + len(heldout) == len(source) and 0.08 < len(heldout) / len(source) < 0.12
    assert quality_data.held_out(heldout[ROW_KEY]).all() and not quality_data.held_out(train[ROW_KEY]).any()
    assert list(train.columns) == list(source.columns)
    again = quality_data.prepare(table, tmp_path)
    assert again.reused and not prepared.reused and again.directory == prepared.directory
    assert (again.rows, again.heldout_rows) == (prepared.rows, prepared.heldout_rows)


def test_the_config_sets_only_what_a_user_sets(tmp_path):
    prepared = quality_data.prepare(TABLES["mlc_churn"], tmp_path / "cache")
    path = quality_data.write_config(prepared, tmp_path / "root", tmp_path / "churn.yaml")
    config = load_config(path)
    raw = path.read_text()
    assert set(__import__("yaml").safe_load(raw)) == {"pipeline", "data", "features"}  # the Evaluator's default bar
    assert config.data.schema_file is None and config.data.input_dir == str(prepared.input_dir)
    assert (config.features.label, config.features.task, config.features.positive_class) == ("churn", "binary", "yes")
    assert config.features.ignore == [ROW_KEY] and config.pipeline.name == "quality-mlc-churn"
    assert config.trainer == load_config(None, ["features.label=churn"]).trainer  # the trainer's defaults


def test_flights_label_is_late_by_more_than_15_minutes_and_cancelled_flights_go():
    frame = pd.DataFrame({"arr_delay": [15.0, 16.0, np.nan, -3.0], ROW_KEY: [1, 2, 3, 4]})
    derived = TABLES["flights"].derive(frame)
    assert derived[ROW_KEY].tolist() == [1, 2, 4] and derived["late"].tolist() == [0, 1, 0]
    with pytest.raises(SystemExit, match="no table nope"):
        quality_tables.parse("flights,nope")
    assert [t.name for t in quality_tables.parse("")] == list(TABLES)


def test_baseline_columns_parse_dates_and_cap_categories():
    rng = np.random.default_rng(0)
    values = [f"v{i}" for i in rng.zipf(1.3, 2000) % 400]
    frame = pd.DataFrame({"when": ["2013-01-01T10:00:00Z", "2013-06-15T23:00:00Z", None, "2014-02-03"] * 500,
                          "many": values, "n": rng.normal(size=2000)})
    frame.loc[3, "many"] = None
    columns = baselines.columns_of(frame, ["when", "many", "n"])
    assert columns.numeric == ("n",) and columns.dates == ("when",)
    counts = frame["many"].value_counts()
    assert len(columns.categories["many"]) == 254 and columns.categories["many"][0] == counts.index[0]
    x = baselines.design(pd.concat([frame.head(4), pd.DataFrame({"when": ["2020-01-01"], "many": ["never seen"],
                                                                 "n": [0.0]})], ignore_index=True), columns)
    assert x[["when_year", "when_month", "when_dayofweek", "when_hour"]].iloc[1].tolist() == [2013, 6, 5, 23]
    assert x["when_year"].isna().tolist() == [False, False, True, False, False]
    assert len(x["many"].cat.categories) == 255 and x["many"].iloc[4] == baselines.OTHER and pd.isna(x["many"][3])


def test_the_linear_model_also_reads_few_valued_whole_numbers_one_hot():
    x = pd.DataFrame({"hour": [5.0, 6.0, None, 23.0] * 10, "fare": [1.5, 2.0, 3.0, 4.0] * 10,
                      "id": np.arange(40, dtype=float)})
    assert baselines.few_valued(x, ["hour", "fare", "id"]) == ["hour"]  # fractions, and 40 distinct ids, are not
    linear = baselines._for_linear(x, [], ["hour"])
    assert linear["hour=one-hot"].tolist()[:4] == ["5.0", "6.0", baselines.MISSING, "23.0"]
    assert linear["hour"].equals(x["hour"])  # and the value itself stays


def test_baselines_on_a_real_table_are_cached(tmp_path):
    prepared = quality_data.prepare(TABLES["hpc_data"], tmp_path)
    first = baselines.scores(prepared)
    _, heldout = prepared.frames()
    majority = heldout["class"].value_counts(normalize=True).iloc[0]  # what the trivial model scores
    assert majority < first["linear"]["value"] < first["gbm"]["value"] <= 1
    assert first["columns"]["categorical"] == {"protocol": 14, "day": 7} and not first["reused"]
    again = baselines.scores(prepared)
    assert again["reused"] and again["gbm"] == first["gbm"]


def test_figures_read_the_same_for_auc_and_rmse():
    assert quality_metrics.gap_closed(0.70, 0.65, 0.75) == pytest.approx(0.5)
    assert quality_metrics.gap_closed(900.0, 1100.0, 500.0) == pytest.approx(1 / 3)  # RMSE: lower is better
    assert quality_metrics.gap_closed(1200.0, 1100.0, 500.0) < 0
    assert quality_metrics.gap_closed(None, 0.6, 0.7) is None and quality_metrics.gap_closed(0.7, 0.6, 0.6) is None
    assert quality_metrics.beats(TABLES["diamonds"], 900.0, 1100.0) and not quality_metrics.beats(
        TABLES["flights"], 0.6, 0.65)
    assert quality_metrics.value(TABLES["diamonds"], np.array([1.0, 3.0]), np.array([2.0, 2.0])) == 1.0
    assert quality_metrics.value(TABLES["hpc_data"], np.array(["F", "VF"]), np.array(["F", "F"])) == 0.5
    assert quality_metrics.truth(TABLES["mlc_churn"], pd.Series(["yes", "no"])).tolist() == [1, 0]
    with pytest.raises(ValueError, match="2 labels against 1 predictions"):
        quality_metrics.value(TABLES["flights"], np.array([0, 1]), np.array([0.3]))


SUMMARY = """some log line
run 2026-12-06T01:41:19
components:
  Transform                        ran        28.1s
  total                                       88.6s
data snapshot: 6ad969 (294725 rows)
fit: not overfitting: eval loss lowest at the last evaluation
blessed: NO
  why: auc: below 0.9
pushed: /tmp/bench-x/serving_model/quality-flights/17965 (version 17965)
  serving labels now: stable 17965 (python -m pipeline serving status)
artifacts: /tmp/x
INFO:absl:after the summary
"""


def _table(ours, gap, beats, blessed=True) -> dict:
    return {"task": "binary", "metric": "auc", "rows": 1000, "heldout_rows": 100, "ours": ours, "linear": 0.65,
            "gbm": 0.75, "gap_closed": gap, "beats_linear": beats, "wall_seconds": 60.0, "x_penguins": 2.0,
            "blessed": blessed, "components": {"CsvExampleGen": 2.0, "Transform": 10.0}, "said": ["blessed: yes"]}


def test_the_summary_said_and_the_results_state_both_targets(tmp_path):
    assert quality.said(SUMMARY) == ["fit: not overfitting: eval loss lowest at the last evaluation", "blessed: NO",
                                     "  why: auc: below 0.9", "pushed: version 17965"]
    penguins = {"wall_seconds": 30.0, "measured": "by this part"}
    q = quality.summarise({"a": _table(0.73, 0.8, True), "b": _table(None, None, False, blessed=False)}, penguins,
                          ["trainer.learning_rate=0.003"])
    assert (q["mean_gap_closed"], q["gaps_counted"], q["gap_target_met"], q["all_beat_linear"]) == (0.8, 1, False,
                                                                                                   False)
    text = "\n".join(quality_report.markdown(q))
    assert ("| a | binary: auc | 1,000 (100) | 0.730 | 0.650 | 0.750 | **0.80** | yes | 60.0 (2.0x) "
            "| 2 / – / 10 / – / – |") in text
    assert "| b | binary: auc | 1,000 (100) | not pushed (not blessed) |" in text
    assert "Mean gap closed over 1 of 2 tables: **0.80** (target >= 0.5: NOT met)" in text
    assert "every table beats the linear model: NO" in text and "Overrides: trainer.learning_rate=0.003" in text
    quality_report.plot(q, tmp_path / "q.png")
    assert (tmp_path / "q.png").stat().st_size > 5_000
