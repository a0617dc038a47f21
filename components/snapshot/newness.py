"""Is there a span the model serving now was not trained on? The Snapshot's answer, as artifact properties.

data.skip_when_no_new_span: a run whose newest span is not newer than the
newest span of the version serving now has nothing to retrain on. The
Snapshot answers it at run time (on Vertex too: a compiled spec can't know)
from the serving version's training-data record (components/training_record.py,
written by the Pusher) and sets `new_span` (1/0) on its DatasetSnapshot; the
DAG runs everything after the Snapshot only when it is 1 (pipeline/dag/conditions.py).
The question is the serving version's, not MLMD's last blessed model: the
serving directory is what both platforms share, and what the drift gate compares with.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from components import training_record
from components.snapshot import spans

# DatasetSnapshot custom properties.
NEW_SPAN = "new_span"                # 1: something to train on (or not checked); 0: nothing new
NEWEST_SPAN = "newest_span"          # the newest span in the source when checked
SERVING_VERSION = "serving_version"  # the version it was compared with
SERVING_SPANS = "serving_spans"      # the spans that version was trained on, comma-separated


@dataclasses.dataclass(frozen=True)
class Newness:
    new: bool
    newest: str = ""
    serving_version: str = ""
    serving_spans: tuple[str, ...] = ()

    def properties(self) -> dict[str, int | str]:
        return {NEW_SPAN: int(self.new), NEWEST_SPAN: self.newest, SERVING_VERSION: self.serving_version,
                SERVING_SPANS: ",".join(self.serving_spans)}


def check(newest: spans.Span, serving_dir: str) -> Newness:
    """New unless a version serves whose record names spans at least as new as `newest`, the source's newest.

    Nothing serving, a version without a record (pushed before records were kept) or one trained on a flat
    source: new, there is nothing to compare with.
    """
    current, record = training_record.serving_record(serving_dir) if serving_dir else (None, None)
    if current is None or record is None or not record.spans:
        return Newness(True, newest.name)
    seen = [spans.parse_name(s) for s in record.spans]
    # Numbered and dated spans don't compare: a source that changed layout is new data.
    comparable = all(len(k) == len(newest.key) for k in seen)
    return Newness(not comparable or newest.key > max(seen), newest.name, current.name, record.spans)


def not_checked() -> Newness:
    """Flat source, a pinned snapshot, or data.skip_when_no_new_span off: the run goes on."""
    return Newness(True)


def from_properties(properties: dict) -> Optional[Newness]:
    """What a DatasetSnapshot's properties say (None if it predates the check); numbers may come back as floats."""
    if NEW_SPAN not in properties:
        return None
    served = str(properties.get(SERVING_SPANS, ""))
    return Newness(int(properties[NEW_SPAN]) == 1, str(properties.get(NEWEST_SPAN, "")),
                   str(properties.get(SERVING_VERSION, "")), tuple(s for s in served.split(",") if s))
