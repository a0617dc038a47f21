"""What the snapshot rewrites in CSV files: missing-value tokens such as `NA` become empty cells, a UTF-8
byte-order mark is dropped. Why: docs/internals.md."""

from __future__ import annotations

import codecs
import csv
import dataclasses
import hashlib
import io
from typing import BinaryIO, Iterable, Iterator, Optional

# The default of data.missing_values; an empty cell is always missing.
DEFAULT_TOKENS = ("NA", "N/A", "null", "NaN")
# What Excel's "CSV UTF-8" and Windows Notepad write first. TFX's CsvExampleGen keeps it in the first
# column's name (tfx/utils/io_utils.py load_csv_column_names), where it is invisible; the snapshot drops it.
UTF8_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20


class _Recorder:
    """A line iterator for csv.reader that keeps the raw text of the current record."""

    def __init__(self, lines: Iterable[str]):
        self._lines = iter(lines)
        self.raw: list[str] = []

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.raw.append(line)
        return line


def _text_lines(stream: BinaryIO) -> Iterator[str]:
    """UTF-8 lines ending in '\\n' (a '\\r' before it stays), decoded incrementally.

    Raises UnicodeDecodeError. Only '\\n' splits: str.splitlines would also split
    inside cells at characters the csv module treats as ordinary text.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")()  # a leading byte-order mark is dropped
    pending = ""
    while chunk := stream.read(_CHUNK):
        *lines, pending = (pending + decoder.decode(chunk)).split("\n")
        yield from (line + "\n" for line in lines)
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending


def clean(stream: BinaryIO, tokens: Iterable[str], counts: dict[str, int]) -> Iterator[bytes]:
    """The CSV in `stream` with every cell equal to a token emptied, as UTF-8 chunks.

    A leading UTF-8 byte-order mark is dropped. `counts` receives the number of cells emptied per column. Raises
    UnicodeDecodeError or csv.Error for a file that is not UTF-8 CSV; the
    caller then keeps the file as it is, for the CSV checks to report.
    """
    tokens = frozenset(t for t in tokens if t)
    recorder = _Recorder(_text_lines(stream))
    reader = csv.reader(recorder, strict=True)
    header: list[str] = []
    out: list[str] = []
    size = 0
    for row in reader:
        raw, recorder.raw = "".join(recorder.raw), []
        hits = [i for i, cell in enumerate(row) if cell in tokens] if header else []
        if not header:
            header = row
        if hits:
            for i in hits:
                name = header[i] if i < len(header) else f"#{i + 1}"
                counts[name] = counts.get(name, 0) + 1
            row = ["" if i in hits else cell for i, cell in enumerate(row)]
            raw = _encode(row, _ending(raw))
        out.append(raw)
        size += len(raw)
        if size >= _CHUNK:
            yield "".join(out).encode()
            out, size = [], 0
    if out:
        yield "".join(out).encode()


def _ending(raw: str) -> str:
    for ending in ("\r\n", "\n", "\r"):
        if raw.endswith(ending):
            return ending
    return ""  # the file's last line, without a line break


def _encode(row: list[str], ending: str) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=ending).writerow(row)
    return buffer.getvalue()


class _HashingReader:
    """A binary stream that hashes what is read from it."""

    def __init__(self, stream: BinaryIO, h):
        self.stream, self.h = stream, h

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        self.h.update(data)
        return data


@dataclasses.dataclass(frozen=True)
class Cleaned:
    source_sha256: str   # of the bytes read
    sha256: str          # of the bytes written
    size: int
    emptied: dict[str, int]  # cells emptied per column
    dropped_bom: bool        # the source began with a UTF-8 byte-order mark

    @property
    def changed(self) -> bool:
        return bool(self.emptied) or self.dropped_bom


def copy_cleaned(src, dst, path: str, target: str, tokens: Iterable[str], has_bom: bool) -> Optional[Cleaned]:
    """Copy `path` of storage `src` to `target` of storage `dst` (components/data/snapshot/store.py's
    Storage) with token cells emptied and a byte-order mark dropped (`has_bom`: the first pass saw one). None when
    the file is not UTF-8 CSV: then whatever was written is to be replaced by a plain copy."""
    source_hash, stored_hash, emptied, size = hashlib.sha256(), hashlib.sha256(), {}, 0

    def chunks() -> Iterator[bytes]:
        nonlocal size
        with src.open_read(path) as stream:
            for chunk in clean(_HashingReader(stream, source_hash), tokens, emptied):
                stored_hash.update(chunk)
                size += len(chunk)
                yield chunk

    try:
        dst.write(target, chunks())
    except (UnicodeDecodeError, csv.Error):
        return None
    return Cleaned(source_hash.hexdigest(), stored_hash.hexdigest(), size, emptied,
                   dropped_bom=has_bom)

