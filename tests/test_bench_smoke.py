"""The benchmark's parts at a small size: the data generator against the schema,
the TFX-example data conversion, the process watcher, the results summary.
The benchmark itself (`make bench`) is not part of the test suite."""

import os
import sys

import numpy as np
import pandas as pd
import pytest
from tfx.dsl.component.experimental.annotations import OutputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types.standard_artifacts import Examples

from bench import local as bench_local
from bench import run as bench_run
from bench import tfx_penguin
from bench.data_generator import generate, load_profile, read_source, write_dataset
from bench.measure import run_measured
from bench.scale_plot import plot_scale
from pipeline.config import REPO_ROOT, load_config

ROWS = 1000
CONFIG = load_config(REPO_ROOT / "configs" / "local.yaml")
SOURCE_CSV = REPO_ROOT / "data" / "penguins" / "penguins.csv"
NUMERIC = [f.name for f in CONFIG.features.numeric]


@pytest.fixture(scope="module")
def frame():
    return generate(ROWS, seed=7)


def test_generator_is_deterministic_and_keeps_the_source_columns(frame):
    pd.testing.assert_frame_equal(frame, generate(ROWS, seed=7))
    assert not frame.equals(generate(ROWS, seed=8))
    assert tuple(frame.columns) == tuple(pd.read_csv(SOURCE_CSV).columns)
    assert len(frame) == ROWS


def test_generator_follows_the_real_per_species_distributions(frame):
    source = read_source(CONFIG)
    share = frame["species"].value_counts(normalize=True)
    real = source["species"].value_counts(normalize=True)
    assert (abs(share - real) < 0.05).all(), (share, real)
    # Islands as in the real colonies: Gentoo only on Biscoe, Chinstrap only on Dream.
    assert set(frame.loc[frame.species == "Gentoo", "island"]) == {"Biscoe"}
    assert set(frame.loc[frame.species == "Chinstrap", "island"]) == {"Dream"}
    means = frame.groupby("species")[NUMERIC].mean()
    real_means = source.groupby("species")[NUMERIC].mean()
    real_std = source.groupby("species")[NUMERIC].std()
    assert (abs(means - real_means) < 0.5 * real_std).all().all(), means
    # Correlation kept: heavier penguins have longer flippers.
    assert frame["body_mass_g"].astype(float).corr(frame["flipper_length_mm"].astype(float)) > 0.7


def test_generator_includes_missing_values_like_the_source(frame):
    all_missing = frame[NUMERIC].isna().all(axis=1)
    assert 0 < all_missing.sum() < 0.03 * ROWS
    assert frame.loc[all_missing, "sex"].isna().all()
    assert 0 < frame["sex"].isna().sum() < 0.1 * ROWS
    assert not frame[["species", "island", "year"]].isna().any().any()


def test_written_shards_parse_as_the_schema_expects(tmp_path):
    import tensorflow_data_validation as tfdv

    paths = write_dataset(tmp_path / "data", ROWS, seed=1, shards=3)
    assert len(paths) == 3
    shards = [pd.read_csv(p) for p in paths]
    assert sum(len(s) for s in shards) == ROWS
    # Integers stay integers in the CSV, so CsvExampleGen infers INT as the schema says.
    header, *rows = [line.split(",") for line in paths[0].read_text().splitlines()]
    assert header == list(pd.read_csv(SOURCE_CSV, nrows=0).columns)
    int_cells = [row[header.index(c)] for row in rows for c in ("flipper_length_mm", "body_mass_g", "year")]
    assert all(cell.isdigit() for cell in int_cells if cell)
    stats = tfdv.generate_statistics_from_csv(str(paths[0]))
    schema = tfdv.load_schema_text(str(REPO_ROOT / "schema" / "penguins.pbtxt"))
    anomalies = tfdv.validate_statistics(stats, schema)
    assert not anomalies.anomaly_info, anomalies.anomaly_info
    with pytest.raises(FileExistsError, match="not empty"):
        write_dataset(tmp_path / "data", 10)


def test_generator_rejects_bad_sizes_and_sources(tmp_path):
    with pytest.raises(ValueError, match="rows must be positive"):
        generate(0)
    with pytest.raises(ValueError, match="shards must be between"):
        write_dataset(tmp_path / "x", 5, shards=6)
    (tmp_path / "bad").mkdir()
    pd.read_csv(SOURCE_CSV).drop(columns=["island"]).to_csv(tmp_path / "bad" / "penguins.csv", index=False)
    with pytest.raises(ValueError, match="lacks columns \\['island'\\]"):
        load_profile(load_config(REPO_ROOT / "configs" / "local.yaml", [f"data.input_dir={tmp_path / 'bad'}"]))


def test_generator_follows_the_config_of_another_dataset():
    """The taxi config: a binary label, integer categories, a third of the companies missing."""
    taxi = load_config(REPO_ROOT / "configs" / "taxi.yaml")
    source, frame = read_source(taxi), generate(3000, seed=1, profile=load_profile(taxi))
    assert list(frame.columns) == list(source.columns)
    assert abs(frame["big_tipper"].mean() - source["big_tipper"].mean()) < 0.03
    assert abs(frame["company"].isna().mean() - source["company"].isna().mean()) < 0.03
    assert set(frame["trip_start_hour"].dropna()) <= set(range(24)) and frame["trip_start_hour"].dtype == "Int64"
    # Credit cards tip, cash (as recorded) does not: the per-class value frequencies survive.
    assert frame.loc[frame.big_tipper == 1, "payment_type"].value_counts().index[0] == "Credit Card"


def test_tfx_example_gets_the_same_rows_in_its_own_columns(tmp_path):
    path = tfx_penguin.write_example_data(SOURCE_CSV, tmp_path)
    assert path == tmp_path / "labelled" / "penguins.csv"
    source, theirs = pd.read_csv(SOURCE_CSV), pd.read_csv(path)
    assert list(theirs.columns) == ["species", "culmen_length_mm", "culmen_depth_mm", "flipper_length_mm",
                                    "body_mass_g"]
    complete = source.dropna(subset=NUMERIC)
    assert len(theirs) == len(complete) == 342
    assert dict(theirs["species"].value_counts()) == {
        i: n for i, n in enumerate(complete["species"].value_counts().sort_index())}
    np.testing.assert_allclose(theirs["culmen_length_mm"], complete["bill_length_mm"])


def test_process_watcher_sees_the_whole_tree(tmp_path):
    # A child that holds ~200 MB in a grandchild for a moment.
    grandchild = "b = bytearray(200 * 2**20); import time; time.sleep(1.5)"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}], check=True)"
    measured = run_measured([sys.executable, "-c", child], str(tmp_path / "log"))
    assert measured.returncode == 0
    assert measured.wall_seconds >= 1.5
    assert measured.peak_rss_mb >= 200
    t, _ = measured.samples[len(measured.samples) // 2]
    assert measured.peak_between(t, t) is not None
    assert measured.peak_between(0, 1) is None


def test_beam_settings_and_size_parsing():
    assert "beam.direct_running_mode=in_memory" in bench_run.beam_settings(1000)
    assert "beam.direct_running_mode=multi_processing" in bench_run.beam_settings(1_000_000)
    assert bench_run.parse_sizes("1_000_000, 100000") == [100000, 1000000]
    assert bench_run.parse_sizes("") == []
    with pytest.raises(SystemExit, match="--sizes"):
        bench_run.parse_sizes("a lot")


def test_markdown_states_ratios_and_misses():
    component = {"state": "ran", "seconds": 10.0, "peak_rss_mb": 900.0}
    side = {"wall_seconds": 40.0, "components_seconds": 30.0, "outside_components_seconds": 10.0,
            "peak_rss_mb": 1000.0, "components": {"Transform": component}, "accuracy": 0.98}
    text = bench_run.markdown({"local": {"ours": side, "theirs": side, "ratio": 1.0, "target_ratio": 0.3,
                                         "met": False},
                               "trainer": {"skipped": "not there"}})
    assert "ratio 1.00x" in text and "NOT met" in text
    assert "| Transform | 10.0 | 900.0 | 10.0 | 900.0 |" in text
    assert "Not measured: not there." in text
    assert "No-change rerun" not in text and "Before/after" not in text

    rerun = {"wall_seconds": 12.0, "imports_wall_seconds": 10.0, "beyond_imports_seconds": 2.0,
             "not_cached": [], "all_beyond_imports_seconds": [2.0, 2.5], "target_seconds": 3.0, "met": True}
    faster = {**side, "wall_seconds": 20.0, "components": {"Transform": {**component, "seconds": 5.0}}}
    text = bench_run.markdown({"local": {"ours": faster, "theirs": side, "ratio": 0.5, "target_ratio": 0.25,
                                         "met": False, "rerun": rerun,
                                         "before_after": {"checkout": "/tmp/base", "before": side,
                                                          "all_wall_seconds": [40.0], "wall_ratio": 0.5}}})
    assert "**2.0s beyond the imports** (target <= 3s: met); components not served from cache" in text
    assert "judge the candidate against it (the Evaluator and the Pusher): none." in text
    assert "**after/before 0.50x wall**; before/theirs was 1.00x" in text
    assert "| Transform | 10.00 | 5.00 |" in text and "| *wall* | 40.0 | 20.0 |" in text


def test_scale_part_states_throughput_memory_growth_and_plots(tmp_path):
    def run(rows: int, transform_seconds: float, peak: float) -> dict:
        r = {"wall_seconds": 4 * transform_seconds, "peak_rss_mb": peak, "beam": [],
             "components": {"Transform": {"seconds": transform_seconds, "peak_rss_mb": peak},
                            "Pusher": {"seconds": 0.02, "peak_rss_mb": 900.0}}}
        bench_run._add_throughput(r, rows)
        return r

    cores = os.cpu_count() or 1
    scale = bench_run.summarize_scale({"100000": run(100_000, 10.0, 2000.0), "1000000": run(1_000_000, 50.0, 2500.0),
                                       "10000000": run(10_000_000, 400.0, 4000.0)})
    assert scale["runs"]["1000000"]["components"]["Transform"]["rows_per_second_per_core"] == round(20_000 / cores)
    assert "rows_per_second_per_core" not in scale["runs"]["1000000"]["components"]["Pusher"]
    assert scale["peak_growth"] == {"rows": [1_000_000, 10_000_000], "ratio": 1.6, "target": 1.5, "met": False}
    text = bench_run.markdown({"scale": scale})
    assert f"| Transform | {round(10_000 / cores)} | {round(20_000 / cores)} | {round(25_000 / cores)} |" in text
    assert "| Pusher |" in text.split("Rows per second")[0] and "| Pusher |" not in text.split("Rows per second")[1]
    assert "Peak RSS at 10000000 rows is **1.6x** that at 1000000 rows (target <= 1.5x: NOT met)." in text
    plot_scale(scale, tmp_path / "scale.png")
    assert (tmp_path / "scale.png").read_bytes()[:4] == b"\x89PNG"


def test_before_checkout_must_have_its_venv(tmp_path):
    with pytest.raises(SystemExit, match=r"--before .*: no \.venv/bin/python there"):
        bench_local.check_before(tmp_path)


@component
def _Produce(examples: OutputArtifact[Examples]):  # noqa: N802
    sum(range(200_000))


def test_profile_run_charges_each_component_to_its_node_id(tmp_path, monkeypatch):
    """bench/profile_run.py wraps TFX's Launcher.launch and names a phase by the node id (TFX internals)."""
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.metadata import sqlite_metadata_connection_config
    from tfx.orchestration.pipeline import Pipeline
    from tfx.orchestration.portable import launcher

    import pipeline.local.runner as local_runner
    from bench.profile_run import Recorder, instrument

    # Restored after the test: instrument() replaces them for the rest of a profiled process.
    monkeypatch.setattr(launcher.Launcher, "launch", launcher.Launcher.launch)
    for name in ("create_pipeline", "summarize", "write_report"):
        monkeypatch.setattr(local_runner, name, getattr(local_runner, name))

    recorder = Recorder(None)
    instrument(recorder)
    LocalDagRunner().run(Pipeline(
        pipeline_name="profiled", pipeline_root=str(tmp_path / "root"), components=[_Produce().with_id("first")],
        metadata_connection_config=sqlite_metadata_connection_config(str(tmp_path / "mlmd.sqlite"))))
    phase = recorder.phases["first"]
    assert phase.calls == 1 and phase.wall > 0 and phase.cpu > 0


def test_exact_auc_matches_the_definition():
    from sklearn.metrics import roc_auc_score

    from bench.scoring import auc

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    scores = np.round(labels * 0.3 + rng.random(500), 1)  # many ties
    assert auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        auc([1, 1], [0.2, 0.3])


def test_taxi_markdown_states_both_targets():
    component = {"state": "ran", "seconds": 10.0, "peak_rss_mb": 900.0}
    side = {"wall_seconds": 40.0, "components_seconds": 30.0, "outside_components_seconds": 10.0,
            "peak_rss_mb": 1000.0, "components": {"Transform": component}, "auc": 0.95}
    text = bench_run.markdown({"taxi": {"ours": side, "theirs": {**side, "wall_seconds": 160.0, "auc": 0.97},
                                        "ratio": 0.25, "target_ratio": 0.35, "auc_margin": 0.01,
                                        "eval_rows": 5039, "same_eval_rows": True, "met": False,
                                        "all_wall_seconds": {"ours": [40.0], "theirs": [160.0]}}})
    assert "ratio 0.25x" in text and "ours **0.950**, theirs **0.970**" in text and "NOT met" in text
    assert "same 5039 rows, our test split (all in their eval split: yes)" in text


def test_example_gen_part_measures_ours_and_skips_tfx_above_its_limit(tmp_path):
    from bench.example_gen_bench import bench_example_gen, plot_example_gen
    from bench.results_md import markdown

    result = bench_example_gen(tmp_path, [600], bench_run.beam_settings, tfx_max_rows=500)
    run = result["runs"]["600"]
    assert run["ours"]["wall_seconds"] > 0 and run["ours"]["peak_rss_mb"] > 100
    assert run["tfx"] == {"skipped": "above 500 rows"} and "ratio" not in run
    written = sorted(p.name for p in (tmp_path / "eg-ours-600").rglob("*.gz"))
    assert written and all(name.startswith("data_tfrecord-") for name in written)
    plot_example_gen(result, tmp_path / "eg.png")
    assert (tmp_path / "eg.png").stat().st_size > 5_000
    stamped = {**result, "measured_at": "now", "load_average": {"start": [0], "end": [0]}}
    assert "| 600 | " in markdown({"example_gen": stamped})


def test_predict_part_is_summarised_with_its_speedup_and_peak_growth():
    from bench.results_md import markdown

    ours = {"wall_seconds": 10.0, "peak_rss_mb": 1000, "rows_per_second": 100_000, "job_seconds": 8.0,
            "job_rows_per_second": 125_000, "rejected": 0}
    part = {"model_version": "7", "cpus": 2, "measured_at": "now", "load_average": {"start": [0], "end": [0]},
            "peak_growth": 1.1, "peak_growth_target": 1.5, "runs": {
                "1000000": {"ours": ours, "speedup": 3.5, "tfx": {"wall_seconds": 35.0, "peak_rss_mb": 2000,
                                                                 "rows_per_second": 28_571,
                                                                 "example_gen_seconds": 9.0}},
                "10000000": {"ours": ours, "tfx": {"skipped": "above 1000000 rows"}}}}
    text = markdown({"predict": part})
    assert "| 1,000,000 | 10.0 (1000) | 100,000 | 125,000 | 35.0 (2000) [+9.0] | 28,571 | 3.5 |" in text
    assert "| 10,000,000 | 10.0 (1000) | 100,000 | 125,000 | above 1000000 rows | - | – |" in text
    assert "1.1x the next size down's (target <= 1.5x)" in text


def test_width_part_gives_ratios_to_penguins_and_the_done_when_verdict(tmp_path):
    from bench import width

    penguins = {"wall_seconds": 20.0, "peak_rss_mb": 1000, "components": {"Transform": {"seconds": 7.0},
                                                                          "Trainer": {"seconds": 2.0}}}
    wide = {"wall_seconds": 90.0, "peak_rss_mb": 1400, "components": {"Transform": {"seconds": 21.0},
                                                                      "Trainer": {"seconds": None}}}
    r = width.ratios(wide, penguins)
    assert r == {"Transform": 3.0, "wall": 4.5, "peak_rss": 1.4}
    part = {"rows": 1000, "penguins": penguins, "runs": {"200": {**wide, "ratios": r}},
            "target": {"columns": 200, "transform": 2.0, "peak": 1.5, "met": False}}
    text = "\n".join(width.markdown(part))
    assert "| Transform | 7.0 | 21.0 (3.0) |" in text and "NOT met" in text
    data = width.write_table(tmp_path, 3, rows=50)
    header, *rows = data.read_text().splitlines()
    assert header == "x0,x1,x2,y" and len(rows) == 50
    width.plot_width(part, tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 5_000


def test_width_part_keeps_each_tables_fastest_round_and_lists_every_rounds_transform():
    from bench import width

    slow = {"wall_seconds": 40.0, "peak_rss_mb": 1000, "components": {"Transform": {"seconds": 9.0}}}
    fast = {"wall_seconds": 30.0, "peak_rss_mb": 1100, "components": {"Transform": {"seconds": 8.0}}}
    best = width._fastest([slow, fast])
    assert best["wall_seconds"] == 30.0 and best["transform_rounds"] == [9.0, 8.0]
    part = {"rows": 1000, "repeat": 2, "penguins": best, "runs": {"200": {**best, "ratios": width.ratios(best, best)}}}
    text = "\n".join(width.markdown(part))
    assert "| *Transform, every round* | 9.0, 8.0 | 9.0, 8.0 |" in text and "ran 2 time(s)" in text
