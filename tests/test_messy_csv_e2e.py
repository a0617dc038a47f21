"""A messy customer table saved as Excel's "CSV UTF-8" (byte-order mark, CRLF) trains by config alone, with only
label, task and positive_class in features; then, with no further setup, `predict` scores held-out rows with the
version it pushed. One pipeline run, as a person starts it from a plain
shell: `python -m pipeline run`, no Make, none of the variables the Makefile sets."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml

from components.data import csv_examples
from components.data.snapshot import store as snapshots
from pipeline.cli import main
from pipeline.config import load_config
from pipeline.runs.report import REPORT_FILE, run_dir
from pipeline.runs.summary import format_summary, summarize
from tests import messy_data
from tests.test_csv_examples import _run
from tests.test_span_example_gen import records
from trainer import environment

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
# The bar for training by config alone: held-out AUC within this of a logistic regression's on the same rows.
LR_MARGIN = 0.015
# A progress line (pipeline/local/progress.py): the seconds since the run began, then what happened.
PROGRESS = re.compile(r"^\[ *\d+\.\ds\] ")
CONTINUED = " " * 14  # the next lines of a multi-line progress message


def plain_shell_env() -> dict:
    """The environment of a plain shell: none of what the Makefile and tests/conftest.py set."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL")}
    assert not set(env) & {*environment.REQUIRED, *environment.DEFAULTS, "PYTHONPATH"}
    return env


@pytest.fixture(scope="module")
def messy_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("messy")
    rows = messy_data.customers()
    data = messy_data.write(tmp / "data", rows, excel=True)
    config_file = tmp / "customers.yaml"
    config_file.write_text(yaml.safe_dump({
        "pipeline": {"name": "customers", "root": str(tmp / "out")},
        "data": {"input_dir": str(data), "schema_file": None},
        "features": {"label": "churned", "task": "binary", "positive_class": "yes"}}))
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(config_file)], cwd=REPO,
                          env=plain_shell_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    config = load_config(config_file)
    summary = summarize(config.pipeline.metadata_path, config.pipeline.name)
    return rows, config, summary, done.stdout, done.stderr, config_file


def test_it_trains_by_config_alone_and_says_how_it_read_each_column(messy_run):
    _, config, summary, console, _, _ = messy_run
    assert summary.blessed is True and summary.pushed_path, console
    table = console.split("columns, as this run reads them", 1)[1].split("Transform done", 1)[0]
    roles = {line.split()[0]: line.split()[1] for line in table.splitlines()[1:] if len(line.split()) > 2}
    assert roles == {"churned": "label", "customer_id": "id", "signup_date": "date", "plan": "categorical",
                     "monthly_fee": "numeric", "support_calls": "numeric", "autopay": "boolean",
                     "region": "categorical", "notes": "text"}, table
    assert "excluded: an id of the row" in table and "read as iso" in table
    # The byte-order mark is gone from the first name; nothing names it with one.
    assert "\ufeff" not in console


def test_held_out_auc_is_within_the_margin_of_a_logistic_regression(messy_run):
    rows, _, summary, *_ = messy_run
    held_out = messy_data.customers(3_000, seed=36)
    ours = messy_data.served_auc(summary.pushed_path, held_out)
    baseline = messy_data.logistic_regression_auc(rows, held_out)
    assert ours >= baseline - LR_MARGIN, (ours, baseline)


def test_the_serving_graph_reads_raw_dates_booleans_and_unseen_regions(messy_run):
    _, _, summary, *_ = messy_run
    row = {"customer_id": "99999", "signup_date": "2021-05-03", "plan": "basic", "monthly_fee": "40.00",
           "support_calls": "2", "autopay": "true", "region": "Zürich", "notes": "new; \"hi\"", "churned": ""}
    variants = [row, {**row, "autopay": "YES"}, {**row, "autopay": "false"}, {**row, "autopay": "no"},
                {**row, "region": "Atlantis"}, {**row, "region": "Ná Gaeltachtaí"},
                {**row, "signup_date": "2021-05-03T10:00:00Z"}, {**row, "signup_date": "2024-12-01"},
                {**row, "signup_date": "not a date"}, {**row, "monthly_fee": ""}]
    p = messy_data.served_probabilities(summary.pushed_path, variants)
    assert all(0 < x < 1 and math.isfinite(x) for x in p), p
    assert p[0] == pytest.approx(p[1]) and p[2] == pytest.approx(p[3])  # true is YES, false is no
    assert p[0] != pytest.approx(p[2], abs=1e-4)  # and the flag matters
    assert p[4] == pytest.approx(p[5])  # regions never seen share the OOV bucket
    assert p[0] == pytest.approx(p[6])  # a timestamp of the same day is the same date (no hour in dates)
    assert p[0] != pytest.approx(p[7], abs=1e-4)  # the date is read as a date, not a category


def test_the_excel_file_makes_the_examples_the_plain_one_makes(messy_run, tmp_path):
    rows, *_ = messy_run
    made = {}
    for name, excel in (("plain", False), ("excel", True)):
        source = messy_data.write(tmp_path / name, rows, excel=excel)
        manifest = snapshots.create(str(source), str(tmp_path / "snaps"))
        examples = _run(csv_examples.Executor, Path(manifest.data_uri), tmp_path / f"{name}-out")
        made[name] = {split: records(f"{examples.uri}/Split-{split}/*.gz") for split in ("train", "eval")}
        first = tf.train.Example.FromString(next(iter(made[name]["train"])))
        assert "customer_id" in first.features.feature
    assert made["plain"] == made["excel"]
    assert sum(sum(c.values()) for c in made["plain"].values()) == len(rows)


def test_the_terminal_shows_the_progress_and_the_summary_and_nothing_else(messy_run):
    _, config, summary, out, err, _ = messy_run
    # Not TensorFlow's C++ lines at import (cuFFT/cuDNN/cuBLAS), nor its rendezvous warnings, nor absl's records.
    assert err == "", err[-3000:]
    lines = out.splitlines()
    start = lines.index(f"run {summary.run_id}")
    [log] = (Path(config.pipeline.root_uri) / "logs").iterdir()
    report = f"{run_dir(config, summary.run_id)}/{REPORT_FILE}"
    assert lines[start:] == [*format_summary(summary, config, str(log)).splitlines(), f"report:    {report}"]
    head = lines[:start]
    first = next(i for i, line in enumerate(head) if PROGRESS.match(line))
    # Before the first component, the features as the config names them (none here: no schema to type them by).
    assert head[:first] == [] or (head[0].startswith("features (from the config")
                                  and all(h.startswith("  ") for h in head[1:first])), head[:first]
    assert all(PROGRESS.match(h) or h.startswith(CONTINUED) for h in head[first:]), head
    # All of it is in the run's log instead, from the import on.
    text = log.read_text()
    assert "Unable to register cuDNN factory" in text and "MetadataStore with DB connection initialized" in text


def test_predict_scores_held_out_rows_right_after_with_no_schema_file(messy_run, tmp_path, capsys):
    """The version records the columns it reads and how (trainer/model_inputs.py); predict needs nothing else."""
    _, config, summary, *_, config_file = messy_run
    assert config.data.schema_file is None
    held_out = messy_data.customers(300, seed=36)
    source = messy_data.write(tmp_path / "in", held_out, excel=True)
    # A row without its id (a column the model does not read) is scored; a fee that is no number is rejected.
    held_out[3]["customer_id"] = ""
    held_out[5]["monthly_fee"] = "forty"
    source.joinpath("customers.csv").write_bytes(messy_data.to_csv(held_out, excel=True))
    assert main(["predict", "--config", str(config_file), "--input", str(source),
                 "--output", str(tmp_path / "out")]) == 0
    got = list(csv.DictReader((tmp_path / "out" / "customers.csv").open()))
    assert list(got[0]) == ["line", "class_id", "class_name", "probability"]
    assert [int(g["line"]) for g in got] == [n for n in range(2, 302) if n != 7]
    assert [r["reason"] for r in csv.DictReader((tmp_path / "out" / "rejects.csv").open())] == [
        "monthly_fee: 'forty' is not a number"]
    # The class by name: the positive class and the label's other value, as the version was trained on them.
    assert {(g["class_id"], g["class_name"]) for g in got} == {("0", "no"), ("1", "yes")}
    scored = [r for i, r in enumerate(held_out) if i != 5]
    want = messy_data.served_probabilities(summary.pushed_path, scored)
    np.testing.assert_allclose([float(g["probability"]) for g in got], want, rtol=1e-6)
    record = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (record["rows"], record["scored"], record["rejected"]) == (300, 299, 1)
    assert f"scored 299 of 300 rows with model version {Path(summary.pushed_path).name}" in capsys.readouterr().out
