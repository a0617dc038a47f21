"""Slices and slice gates through the real pipeline (issue 46), on a generated table where one slice is
unlearnable (its labels random, in training and evaluation alike) while the overall AUC passes its bound; three
runs chained on one root: without slice bounds (pushed, every slice reported), with evaluator.slice_lower_bound
(stopped, the slice named), and a candidate that regresses on one slice against the model serving now
(evaluator.slice_max_regression)."""

from __future__ import annotations

import html
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pipeline.config import load_config
from pipeline.errors import EXIT_NOT_PUSHED, EXIT_OK
from pipeline.local.runner import run_local
from pipeline.runs.history import format_history, history
from pipeline.runs.report import REPORT_FILE, run_dir
from pipeline.runs.summary import exit_code, format_summary
from tests.conftest import tree_hashes

pytestmark = pytest.mark.e2e

REGIONS = ("north", "south", "east", "west")
BOUND = 0.7


def _shop_table(rows: int = 1600, seed: int = 0) -> pd.DataFrame:
    """Bought when x1 > 0 (north, south) or x2 > 0 (east), with a little noise; in the west at random."""
    rng = np.random.default_rng(seed)
    region = rng.choice(REGIONS, rows)
    x1, x2 = rng.normal(0, 1, rows).round(3), rng.normal(0, 1, rows).round(3)
    noise = rng.normal(0, 0.3, rows)
    bought = np.where(region == "east", x2 + noise > 0, x1 + noise > 0)
    bought = np.where(region == "west", rng.random(rows) < 0.5, bought)
    return pd.DataFrame({"region": region, "x1": x1, "x2": x2, "bought": np.where(bought, "yes", "no")})


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """run(*overrides) -> (config, summary, console, exit code, serving dir hashes before the run), on one root."""
    base = tmp_path_factory.mktemp("shop")
    (base / "data").mkdir()
    _shop_table().to_csv(base / "data" / "shop.csv", index=False)
    config_file = base / "shop.yaml"
    config_file.write_text(yaml.safe_dump({
        "pipeline": {"name": "shop", "root": str(base / "out")},
        "data": {"input_dir": str(base / "data"), "schema_file": None,
                 # The same data each run: a tightened gate is worth a rerun (Transform and Trainer from cache).
                 "skip_when_no_new_span": False},
        "features": {"label": "bought", "task": "binary", "positive_class": "yes"},
        "evaluator": {"lower_bound": BOUND}}))

    def run(*overrides: str):
        config = load_config(config_file, list(overrides))
        before = tree_hashes(Path(config.pipeline.serving_dir)) if os.path.isdir(config.pipeline.serving_dir) else {}
        out = io.StringIO()
        summary = run_local(config, out)
        return config, summary, format_summary(summary, config), exit_code(summary), before

    return run


@pytest.fixture(scope="module")
def plain_run(shop):
    return shop()


@pytest.fixture(scope="module")
def bounded_run(shop, plain_run):
    return shop(f"evaluator.slice_lower_bound={BOUND}")


@pytest.fixture(scope="module")
def regressed_run(shop, bounded_run):
    """A candidate without x2, the east's only signal, against the plain run's model serving now: overall a little
    worse (allowed), in the east much worse."""
    return shop("features.ignore=[x2]", "evaluator.max_regression=0.3", "evaluator.slice_max_regression=0.1")


def _slice(summary, label):
    [row] = [r for r in summary.slices if r.label == label]
    return row


def _report(config, summary) -> str:
    with open(os.path.join(run_dir(config, summary.run_id), REPORT_FILE)) as f:
        return f.read()


def _section(page: str, anchor: str) -> str:
    return re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S).group(1)


def test_without_slice_bounds_the_model_is_pushed_and_the_report_shows_every_slice(plain_run):
    config, summary, text, code, _ = plain_run
    assert code == EXIT_OK and summary.pushed_path, text
    assert summary.metrics["auc"] >= BOUND
    west = _slice(summary, "region=west")
    assert west.metric < 0.6 <= min(_slice(summary, f"region={r}").metric for r in REGIONS if r != "west")
    assert sorted(r.label for r in summary.slices[1:]) == sorted(f"region={r}" for r in REGIONS)
    assert sum(r.examples for r in summary.slices[1:]) == summary.metrics["example_count"]
    assert not any(r.gated for r in summary.slices)
    assert "slices: region (one per categorical column with at most 10 values; test split)" in text
    quality = _section(_report(config, summary), "quality")
    for r in summary.slices[1:]:
        assert f"<td>{r.label}</td><td>{r.examples:,}</td><td>{r.metric:.4f}</td>" in quality
    alts = re.findall(r'<img alt="([^"]+)"', quality)
    assert alts == ["auc per slice", "ROC and precision-recall curves",
                    "confusion matrix at threshold 0.5 and calibration"]


def test_a_slice_lower_bound_stops_the_run_and_names_the_slice(bounded_run, plain_run):
    config, summary, text, code, serving_before = bounded_run
    west = _slice(summary, "region=west")
    assert code == EXIT_NOT_PUSHED and summary.pushed_path is None and summary.blessed is False
    assert tree_hashes(Path(config.pipeline.serving_dir)) == serving_before  # what serves is untouched
    assert summary.metrics["auc"] >= BOUND  # the overall bound passed: the slice stopped it
    assert summary.component("Trainer").state == "cached"  # same data and training config
    assert summary.validation_failures == [
        f"auc {west.metric:.4f} on the {west.examples} examples of slice region=west, "
        f"below evaluator.slice_lower_bound {BOUND}"]
    assert f"  why: {summary.validation_failures[0]}" in text
    assert "pushed: nothing, not blessed" in text
    assert west.gated and west.failed and all(r.gated and not r.failed for r in summary.slices[1:] if r is not west)
    quality = html.unescape(_section(_report(config, summary), "quality"))
    assert f"<td>region=west</td><td>{west.examples}</td><td>{west.metric:.4f}</td>" in quality
    assert "FAILED" in quality


def test_slice_max_regression_stops_a_candidate_worse_than_the_serving_model_on_one_slice(regressed_run, plain_run):
    config, summary, text, code, serving_before = regressed_run
    east = _slice(summary, "region=east")
    assert summary.component("Trainer").state == "ran"
    assert code == EXIT_NOT_PUSHED and summary.pushed_path is None
    assert tree_hashes(Path(config.pipeline.serving_dir)) == serving_before
    # Compared with the model serving now (the plain run's push) on the same rows.
    assert east.baseline == pytest.approx(_slice(plain_run[1], "region=east").metric)
    assert east.baseline - east.metric > 0.1 and east.failed
    overall_drop = summary.baseline_metrics["auc"] - summary.metrics["auc"]
    assert 0 < overall_drop <= 0.3  # within evaluator.max_regression: the slice stopped it
    assert (f"auc {east.metric:.4f} on the {east.examples} examples of slice region=east, "
            f"{east.baseline - east.metric:.4f} worse than the serving model's {east.baseline:.4f} on the same rows: "
            f"more than evaluator.slice_max_regression 0.1") in summary.validation_failures


def test_history_shows_each_slices_metric_over_the_runs(regressed_run, bounded_run, plain_run):
    config = regressed_run[0]
    rows = history(config)
    text = format_history(rows, "auc")
    table = text.split("auc per slice:\n", 1)[1].splitlines()
    columns = table[0].split()[1:]
    assert sorted(columns) == sorted(f"region={r}" for r in REGIONS)
    for (_, summary, *_), line in zip((plain_run, bounded_run, regressed_run), table[1:4]):
        assert line.split() == [summary.run_id[:27], *(f"{_slice(summary, c).metric:.4f}" for c in columns)]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_quality_part_renders_in_a_real_browser(bounded_run, tmp_path):
    """The report's top (run, quality: slice chart, ROC/PR, confusion matrix and calibration) in headless Chromium:
    the failed slice's red bar and the plots' blue are on the screen."""
    from PIL import Image

    config, summary, *_ = bounded_run
    shot = tmp_path / "quality.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2200", f"--screenshot={shot}",
                    f"file://{os.path.join(run_dir(config, summary.run_id), REPORT_FILE)}"],
                   check=True, capture_output=True, timeout=120)
    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    red = (abs(r - 0xb0) < 12) & (abs(g - 0x3a) < 12) & (abs(b - 0x2e) < 12)   # eval_plots.BAD_COLOR
    blue = (abs(r - 0x2e) < 12) & (abs(g - 0x86) < 12) & (abs(b - 0xc1) < 12)  # eval_plots.MAIN_COLOR
    assert red.sum() > 2000, red.sum()  # the failed slice's bar
    assert blue.sum() > 2000, blue.sum()  # the overall bar and the curves
    # The plots are below the slice table: ink in the lower half of the window too.
    assert (image[1100:].sum(axis=2) < 384).sum() > 5000
