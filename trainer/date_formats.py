"""The date and timestamp formats recognised in CSV cells, read in Python (role inference); trainer/dates.py
reads them the same way as TensorFlow ops. docs/data.md (column roles)."""

from __future__ import annotations

import re

# name -> (the whole cell, as RE2 and Python both read it; the order of year, month and day in its numbers).
# An optional time ("T" or a space, HH:MM, optional :SS and fraction, optional Z or offset) may follow the date;
# a timestamp's offset is not applied: the hour is the one written.
_TIME = r"(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?: ?(?:Z|[AaPp][Mm]|[+-]\d{2}:?\d{2}))?)?"
FORMATS: dict[str, tuple[str, str]] = {
    "iso": (r"\d{4}-\d{2}-\d{2}" + _TIME, "ymd"),        # 2024-03-31, 2024-03-31T14:05:00Z
    "ymd_slash": (r"\d{4}/\d{1,2}/\d{1,2}" + _TIME, "ymd"),  # 2024/3/31
    "dmy_slash": (r"\d{1,2}/\d{1,2}/\d{4}" + _TIME, "dmy"),  # 31/03/2024 (Europe; Excel outside the US)
    "mdy_slash": (r"\d{1,2}/\d{1,2}/\d{4}" + _TIME, "mdy"),  # 03/31/2024 (US Excel)
    "dmy_dot": (r"\d{1,2}\.\d{1,2}\.\d{4}" + _TIME, "dmy"),  # 31.03.2024 (Germany, Russia)
}
_COMPILED = {name: re.compile(pattern) for name, (pattern, _) in FORMATS.items()}
_HAS_TIME = re.compile(r"\d[T ]\d{1,2}:\d{2}")


def fields(cell: str, fmt: str) -> tuple[int, int, int, int]:
    """(year, month, day, hour) of a cell matching `fmt`, as the TF parse below reads it."""
    numbers = [int(n) for n in re.findall(r"\d+", cell)] + [0]
    order = FORMATS[fmt][1]
    ymd = {k: numbers[i] for i, k in enumerate(order)}
    hour = numbers[3] if _HAS_TIME.search(cell) else 0
    if hour < 12 and re.search(r"[Pp][Mm]\s*$", cell):
        hour += 12
    elif hour == 12 and re.search(r"[Aa][Mm]\s*$", cell):
        hour = 0
    return ymd["y"], ymd["m"], ymd["d"], hour


def valid(cell: str, fmt: str) -> bool:
    if not _COMPILED[fmt].fullmatch(cell.strip()):
        return False
    _, month, day, hour = fields(cell, fmt)
    return 1 <= month <= 12 and 1 <= day <= 31 and hour <= 23


def has_time(cell: str) -> bool:
    return bool(_HAS_TIME.search(cell))
