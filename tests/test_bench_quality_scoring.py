"""The quality part's scoring of a pushed model (bench/quality.py score_pushed) on the shared run's pushed version:
held-out rows through `pipeline predict`'s code, joined back by their row key."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench import quality
from bench.quality_data import Prepared
from bench.quality_tables import ROW_KEY, Table
from tests.conftest import CONFIG

PENGUINS = Path(__file__).resolve().parent.parent / "data" / "penguins" / "penguins.csv"


@pytest.mark.e2e
def test_the_pushed_model_scores_the_held_out_rows_by_their_key(finished_run, tmp_path):
    run = finished_run()
    rows = pd.read_csv(PENGUINS, dtype=str, keep_default_na=False).iloc[::5]  # the cells as written
    rows.insert(0, ROW_KEY, range(1000, 1000 + len(rows)))
    rows.sample(frac=1, random_state=0).to_csv(tmp_path / "heldout.csv", index=False)  # any order: joined by key
    table = Table("penguins", "palmerpenguins", "penguins", "multiclass", "species", "the species", {})
    prepared = Prepared(table, tmp_path, "k", rows=0, heldout_rows=len(rows), reused=False)
    # Without the config's schema file: the version's own record of its inputs, as after a config-alone run.
    scored = quality.score_pushed(prepared, Path(CONFIG), [*run.overrides(), "data.schema_file=null"], run.summary,
                                  tmp_path / "out")
    assert (scored["scored"], scored["rejected"]) == (len(rows), 0)
    assert 0.9 <= scored["ours"] <= 1.0
