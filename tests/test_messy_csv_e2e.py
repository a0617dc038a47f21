"""Issue 35's done-when: a messy customer table saved as Excel's "CSV UTF-8" (byte-order mark, CRLF) trains by
config alone, with only label, task and positive_class in features. One pipeline run."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
import tensorflow as tf
import yaml

from components.data import csv_examples
from components.data.snapshot import store as snapshots
from pipeline.config import load_config
from pipeline.local.runner import run_local
from tests import messy_data
from tests.test_csv_examples import _run
from tests.test_span_example_gen import records

pytestmark = pytest.mark.e2e

# Issue 35: held-out AUC within this of a logistic regression's on the same rows.
LR_MARGIN = 0.015


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
    config = load_config(config_file)
    out = io.StringIO()
    return rows, config, run_local(config, out), out.getvalue()


def test_it_trains_by_config_alone_and_says_how_it_read_each_column(messy_run):
    _, config, summary, console = messy_run
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
    rows, _, summary, _ = messy_run
    held_out = messy_data.customers(3_000, seed=36)
    ours = messy_data.served_auc(summary.pushed_path, held_out)
    baseline = messy_data.logistic_regression_auc(rows, held_out)
    assert ours >= baseline - LR_MARGIN, (ours, baseline)


def test_the_serving_graph_reads_raw_dates_booleans_and_unseen_regions(messy_run):
    _, _, summary, _ = messy_run
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
    rows, config, _, _ = messy_run
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
