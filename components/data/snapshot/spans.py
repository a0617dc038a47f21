"""Spans: data arriving over time as subdirectories of data.input_dir. Why: docs/internals.md."""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
from typing import Optional

from components.errors import SpanError
from components.storage import storage_for

_NUMBERED = re.compile(r"^span-(\d+)$")
_DATED = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_SELECTION = re.compile(r"^(all|latest|window\((\d+)\))$")
_MARKER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
DEFAULT_READY_MARKER = "_SUCCESS"


@dataclasses.dataclass(frozen=True, order=True)
class Span:
    key: tuple          # sort key: (N,) or (year, month, day)
    name: str           # the directory name
    files: int = dataclasses.field(default=0, compare=False)  # data files (the ready marker not counted)
    ready: bool = dataclasses.field(default=True, compare=False)  # holds its ready marker (or none is asked)


def validate_selection(spec: str) -> str:
    """The selection unchanged, or ValueError saying what is accepted."""
    m = _SELECTION.match(spec)
    if not m or (m.group(2) is not None and int(m.group(2)) < 1):
        raise ValueError(f"{spec!r}: expected all, latest or window(k) with k >= 1")
    return spec


def validate_marker(name: str) -> str:
    """The marker file name unchanged, or ValueError: one plain file name inside a span directory."""
    if not _MARKER.match(name):
        raise ValueError(f"{name!r}: expected a file name (letters, digits, '.', '_', '-'; no '/'), e.g. "
                         f"{DEFAULT_READY_MARKER}")
    return name


def _parse(name: str) -> Optional[tuple]:
    if m := _NUMBERED.match(name):
        return (int(m.group(1)),)
    if m := _DATED.match(name):
        try:
            datetime.date(*map(int, m.groups()))
        except ValueError:
            return None
        return tuple(map(int, m.groups()))
    return None


def parse_name(name: str) -> tuple:
    """The sort key of a span directory name; ValueError if it is not one."""
    key = _parse(name)
    if key is None:
        raise ValueError(f"{name!r} is not a span directory name (span-<N> or YYYY-MM-DD)")
    return key


def list_spans(source_uri: str, gcs_client=None, marker: Optional[str] = None) -> list[Span]:
    """Every span of the source, oldest first, each ready or waiting for `marker` (None: all ready);
    SpanError if the source is not in span layout."""
    files = storage_for(source_uri, gcs_client).list()
    counts: dict[str, int] = {}
    marked: set[str] = set()
    for path in files:
        top, sep, rest = path.partition("/")
        if not sep:
            raise SpanError(f"{source_uri}: file {path!r} is outside any span directory; with data.spans set, "
                            "every file must be in a span-<N>/ or YYYY-MM-DD/ directory")
        if marker and rest == marker:
            marked.add(top)
            counts.setdefault(top, 0)
            continue
        counts[top] = counts.get(top, 0) + 1
    if not source_uri.startswith("gs://") and os.path.isdir(source_uri):
        # GCS has no empty directories; locally an empty one is a span that did not land.
        for entry in os.scandir(source_uri):
            if entry.is_dir():
                counts.setdefault(entry.name, 0)
    spans, bad = [], []
    for name, n in counts.items():
        key = _parse(name)
        (bad.append(name) if key is None else spans.append(Span(key, name, n, ready=not marker or name in marked)))
    if bad:
        raise SpanError(f"{source_uri}: {sorted(bad)} are not span directories (span-<N> or YYYY-MM-DD)")
    if not spans:
        raise SpanError(f"{source_uri}: no span directories (missing or empty source?)")
    if len({len(s.key) for s in spans}) > 1:
        raise SpanError(f"{source_uri}: mixes span-<N> and YYYY-MM-DD directories; use one kind")
    return sorted(spans)


def waiting(spans: list[Span]) -> list[Span]:
    """The spans still waiting for their ready marker, oldest first."""
    return [s for s in spans if not s.ready]


def select(spans: list[Span], spec: str, source_uri: str = "", marker: Optional[str] = None) -> list[Span]:
    """The spans `spec` picks out of the ready ones of `spans` (oldest first), checked for holes and empty
    directories; `marker` names the ready marker in messages."""
    validate_selection(spec)
    pending = {s.name for s in waiting(spans)}
    spans = [s for s in spans if s.ready]
    if not spans:
        raise SpanError(f"{source_uri}: no span is ready yet: {sorted(pending)} have no {marker or 'ready'} "
                        "marker (still being written?)")
    if spec == "all":
        chosen = spans
    elif spec == "latest":
        chosen = spans[-1:]
    else:
        chosen = spans[-int(spec[len("window("):-1]):]
    if len(chosen[0].key) == 1:
        numbers = [s.key[0] for s in chosen]
        missing = [f"span-{n}" for n in sorted(set(range(numbers[0], numbers[-1] + 1)) - set(numbers))]
        if missing:
            waits = [n for n in missing if n in pending]
            why = f" ({waits} have no {marker} marker yet: still being written?)" if waits else ""
            raise SpanError(f"{source_uri}: span directories {missing} are missing "
                            f"inside the selection {spec} ({chosen[0].name} .. {chosen[-1].name}){why}")
    empty = [s.name for s in chosen if s.files == 0]
    if empty:
        raise SpanError(f"{source_uri}: span directories {empty} are empty")
    return chosen


def newest(source_uri: str, gcs_client=None, marker: Optional[str] = None) -> Span:
    """The newest ready span."""
    ready = [s for s in list_spans(source_uri, gcs_client, marker) if s.ready]
    if not ready:
        raise SpanError(f"{source_uri}: no span is ready yet (none holds {marker})")
    return ready[-1]
