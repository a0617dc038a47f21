"""Missing-value tokens: cells such as NA become empty in the snapshot, nothing else changes,
and the snapshot records (and its digest covers) the tokens."""

from __future__ import annotations

import hashlib
import importlib.resources
import io
import json
from pathlib import Path

import pytest

from components.data.snapshot import store as snapshots
from components.data.snapshot.missing_values import DEFAULT_TOKENS, clean

SHIPPED = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"


def _clean(data: bytes, tokens=DEFAULT_TOKENS) -> tuple[bytes, dict]:
    counts: dict[str, int] = {}
    return b"".join(clean(io.BytesIO(data), tokens, counts)), counts


def test_token_cells_are_emptied_and_every_other_byte_kept():
    data = (b'id,x,note\r\n1,NA,"a, ""quoted"" NA"\r\n2,3.5,N/A\r\n'
            b'3,null,"two\nlines"\r\nNA,NaN,nan\r\n4,5,NA')
    out, counts = _clean(data)
    assert out == (b'id,x,note\r\n1,,"a, ""quoted"" NA"\r\n2,3.5,\r\n'
                   b'3,,"two\nlines"\r\n,,nan\r\n4,5,')
    assert counts == {"x": 3, "note": 2, "id": 1}  # 'nan' is not a default token: matching is exact


def test_a_file_without_tokens_is_byte_identical_and_the_header_is_never_changed():
    data = b"NA,b\n1,2\n\n3,4\n"
    out, counts = _clean(data)
    assert out == data and counts == {}


def test_not_utf8_csv_raises_for_the_caller_to_keep_the_file():
    with pytest.raises(UnicodeDecodeError):
        _clean(b"a,b\n\xff\xfe,1\n")


def test_shipped_penguins_become_the_file_with_empty_cells():
    out, counts = _clean(SHIPPED.read_bytes())
    assert out == SHIPPED.read_bytes().replace(b"NA", b"")
    assert sum(counts.values()) == 19


def test_snapshot_stores_cleaned_data_and_records_the_tokens(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "penguins.csv").write_bytes(SHIPPED.read_bytes())
    (src / "plain.csv").write_text("a,b\n1,2\n")
    root = tmp_path / "snaps"
    m = snapshots.create(str(src), str(root), missing_values=["NA", "null"])
    stored = root / m.digest / "data"
    assert (stored / "penguins.csv").read_bytes() == SHIPPED.read_bytes().replace(b"NA", b"")
    assert (stored / "plain.csv").read_text() == "a,b\n1,2\n"
    entries = {f.path: f for f in m.files}
    source_sha = hashlib.sha256(SHIPPED.read_bytes()).hexdigest()
    assert entries["penguins.csv"].source_sha256 == source_sha
    assert entries["penguins.csv"].sha256 == hashlib.sha256((stored / "penguins.csv").read_bytes()).hexdigest()
    assert entries["penguins.csv"].emptied["sex"] == 11 and entries["plain.csv"].emptied == {}
    on_disk = json.loads((root / m.digest / "manifest.json").read_text())
    assert on_disk["missing_values"] == ["NA", "null"]
    # The stored (cleaned) bytes verify; the digest covers source bytes and tokens.
    assert snapshots.get(str(root), m.digest).digest == m.digest
    plain = snapshots.create(str(src), str(root))
    other = snapshots.create(str(src), str(root), missing_values=["null", "NA", "NA"])
    assert plain.digest != m.digest == other.digest
    assert (Path(plain.data_uri) / "penguins.csv").read_bytes() == SHIPPED.read_bytes()


def test_a_file_that_is_not_csv_is_kept_for_the_checks_to_report(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "bad.csv").write_bytes(b"a,b\n\xff,NA\n")
    m = snapshots.create(str(src), str(tmp_path / "snaps"), missing_values=["NA"])
    assert (Path(m.data_uri) / "bad.csv").read_bytes() == b"a,b\n\xff,NA\n"
    assert any("not readable as UTF-8 CSV" in p for p in snapshots.csv_problems(m))
