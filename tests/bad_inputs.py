"""A corpus of broken versions of the bundled penguins CSV, one per way real data breaks.

Each case is made from the good file at test time, so the corpus follows the
real data and its header instead of drifting from it.
"""

from __future__ import annotations

from pathlib import Path

GOOD_CSV = Path(__file__).resolve().parent.parent / "data" / "penguins" / "penguins.csv"


def _rows() -> tuple[list[str], list[list[str]]]:
    header, *rows = GOOD_CSV.read_text().splitlines()
    return header.split(","), [r.split(",") for r in rows]


def _csv(header: list[str], rows: list[list[str]], sep: str = ",") -> str:
    return "\n".join(sep.join(r) for r in [header, *rows]) + "\n"


def _set(column: str, value, every: int = 1) -> str:
    header, rows = _rows()
    i = header.index(column)
    for n, r in enumerate(rows):
        if n % every == 0:
            r[i] = value
    return _csv(header, rows)


def missing_column() -> str:
    header, rows = _rows()
    i = header.index("bill_depth_mm")
    return _csv(header[:i] + header[i + 1:], [r[:i] + r[i + 1:] for r in rows])


def numeric_column_with_strings() -> str:
    """Text in a column of numbers: here a missing-value token not in data.missing_values."""
    return _set("body_mass_g", "missing", every=10)


def unseen_island() -> str:
    return _set("island", "Atlantis", every=5)


def feature_entirely_null() -> str:
    return _set("flipper_length_mm", "")


def empty_file() -> str:
    return ""


def header_only() -> str:
    return GOOD_CSV.read_text().splitlines()[0] + "\n"


def truncated_last_line() -> str:
    text = GOOD_CSV.read_text().rstrip("\n")
    return text[: text.rindex(",", 0, text.rindex(",") - 1)]  # the last row loses its last two fields


def different_delimiter() -> str:
    header, rows = _rows()
    return _csv(header, rows, sep=";")


def absurd_values() -> str:
    return _set("body_mass_g", "1000000000", every=7)


CASES = {f.__name__: f for f in (missing_column, numeric_column_with_strings, unseen_island,
                                  feature_entirely_null, empty_file, header_only, truncated_last_line,
                                  different_delimiter, absurd_values)}


def write_case(name: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "penguins.csv").write_text(CASES[name]())
    return directory
