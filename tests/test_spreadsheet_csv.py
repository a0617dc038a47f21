"""CSV files as spreadsheets save them: a UTF-8 byte-order mark is dropped by the snapshot (TFX's CsvExampleGen
keeps it in the first column's name), CRLF and LF both read as TFX reads them, and a header name that differs
from the config only by whitespace or an invisible mark is named in the error with the fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as csv_executor

from components.data import csv_examples
from components.data.snapshot import store as snapshots
from pipeline.config import load_config
from pipeline.data.checks import check_features
from pipeline.errors import ConfigError
from tests.test_csv_examples import _run, _same_as_csv_example_gen
from trainer.errors import FeatureConfigError
from trainer.feature_config import FeatureConfig, resolve

ROWS = "1,basic,3.5,Zürich\n2,pro,,São Paulo\n3,basic,4,\"Ōsaka, JP\"\n"
LF = ("customer_id,plan,fee,region\n" + ROWS).encode()
EXCEL = b"\xef\xbb\xbf" + LF.replace(b"\n", b"\r\n")  # Excel's "CSV UTF-8": a byte-order mark and CRLF


def _names(examples) -> set[str]:
    records = tf.data.TFRecordDataset(tf.io.gfile.glob(f"{examples.uri}/Split-*/*.gz"), compression_type="GZIP")
    return {name for r in records for name in tf.train.Example.FromString(r.numpy()).features.feature}


def _write(directory: Path, data: bytes) -> Path:
    directory.mkdir(parents=True)
    (directory / "customers.csv").write_bytes(data)
    return directory


def test_crlf_reads_as_tfx_reads_it_and_as_lf(tmp_path):
    # Both go through TFX's own line reader for such blocks; TFX's CsvExampleGen is the reference.
    _same_as_csv_example_gen(_write(tmp_path / "crlf", LF.replace(b"\n", b"\r\n")), tmp_path / "a", 3)
    lf = _run(csv_examples.Executor, _write(tmp_path / "lf", LF), tmp_path / "lf-out")
    crlf = _run(csv_examples.Executor, tmp_path / "crlf", tmp_path / "crlf-out")
    assert _names(lf) == _names(crlf) == {"customer_id", "plan", "fee", "region"}


def test_the_snapshot_drops_a_byte_order_mark_where_tfx_keeps_it(tmp_path):
    source = _write(tmp_path / "src", EXCEL)
    # TFX's CsvExampleGen on the file as saved: the mark becomes part of the first name.
    theirs = _run(csv_executor.Executor, source, tmp_path / "theirs")
    assert "\ufeffcustomer_id" in _names(theirs)
    manifest = snapshots.create(str(source), str(tmp_path / "snaps"))
    stored = Path(manifest.data_uri) / "customers.csv"
    assert stored.read_bytes() == EXCEL[3:]  # the mark alone is gone; CRLF and every cell kept
    [entry] = manifest.files
    assert entry.dropped_bom and entry.source_sha256 != entry.sha256 and entry.rows == 3
    assert snapshots.get(str(tmp_path / "snaps"), manifest.digest).digest == manifest.digest  # it verifies
    ours = _run(csv_examples.Executor, Path(manifest.data_uri), tmp_path / "ours")
    assert _names(ours) == {"customer_id", "plan", "fee", "region"}
    # The digest covers the rewrite: a snapshot of the same file made before the mark was dropped holds it.
    as_read = [dataclasses.replace(entry, sha256=entry.source_sha256)]
    assert manifest.digest == snapshots.content_digest(as_read, dropped_bom=True) != snapshots.content_digest(as_read)
    # With missing-value tokens too, both rewrites apply.
    tokens = snapshots.create(str(source), str(tmp_path / "snaps2"), missing_values=["NA"])
    assert (Path(tokens.data_uri) / "customers.csv").read_bytes() == EXCEL[3:]


def _config(tmp_path: Path, header: str, overrides=()):
    data = _write(tmp_path / "data", (header + "\n" + ROWS).encode())
    return load_config("configs/local.yaml", [f"data.input_dir={data}", "data.schema_file=",
                                              "features.label=plan", "features.task=binary",
                                              "features.positive_class=pro", "features.numeric=[]",
                                              "features.categorical=[]", *overrides])


def test_a_byte_order_mark_is_not_part_of_the_first_name_before_the_run(tmp_path):
    config = _config(tmp_path, "\ufeffcustomer_id,plan,fee,region", ["features.ignore=[customer_id]"])
    assert check_features(config) is None  # accepted: the snapshot drops the mark


@pytest.mark.parametrize("header, named, message", [
    ("customer_id,plan,fee ,region", "fee",
     r"features.ignore: 'fee' is not a column .*the column 'fee ' differs from it only by "
     r"U\+0020 SPACE: remove that from the file's header row, or write the name as 'fee ' in the config"),
    ("customer_id,plan,\u200bfee,region", "fee", r"only by U\+200B ZERO WIDTH SPACE"),
    ("customer_id,plan,fee\u00a0,region", "fee", r"only by U\+00A0 NO-BREAK SPACE"),
])
def test_a_name_that_differs_only_by_whitespace_or_a_mark_is_named_with_the_fix(tmp_path, header, named, message):
    with pytest.raises(ConfigError, match=message):
        check_features(_config(tmp_path, header, [f"features.ignore=[{named}]"]))


def test_tfx_strips_the_line_around_the_header_and_so_does_the_check(tmp_path):
    # TFX's load_csv_column_names strips the whole line: a space before the first name is not kept.
    assert check_features(_config(tmp_path, "  customer_id,plan,fee,region", ["features.ignore=[customer_id]"])) is None


def test_against_a_schema_the_near_miss_is_named_too():
    config = FeatureConfig(label="plan", task="binary", positive_class="pro", ignore=["customer_id"])
    with pytest.raises(FeatureConfigError, match=r"'customer_id' is not a column .*U\+FEFF ZERO WIDTH NO-BREAK SPACE"):
        resolve(config, {"\ufeffcustomer_id": "int", "plan": "string", "fee": "float"})
