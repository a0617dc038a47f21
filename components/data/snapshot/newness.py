"""Is there anything the model serving now was not trained on? The Snapshot's answer, as artifact properties.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Mapping, Optional

from components import training_record
from components.data.snapshot import spans, store
from components.serving.model_config import CANARY, STABLE

# DatasetSnapshot custom properties.
NEW_SPAN = "new_span"                # 1: something to train on (or not checked); 0: nothing new
NOTHING_NEW = "nothing_new"          # with 0: why there is nothing to train on, a sentence
NEWEST_SPAN = "newest_span"          # the newest span in the source when checked
SERVING_VERSION = "serving_version"  # the version it was compared with
SERVING_SPANS = "serving_spans"      # the spans that version was trained on, comma-separated
CHANGED_SPANS = "changed_spans"      # spans that version was trained on whose files changed since


@dataclasses.dataclass(frozen=True)
class Newness:
    new: bool
    newest: str = ""
    serving_version: str = ""
    serving_spans: tuple[str, ...] = ()
    changed_spans: tuple[str, ...] = ()
    why_not: str = ""  # with new False: why there is nothing to train on

    def properties(self) -> dict[str, int | str]:
        return {NEW_SPAN: int(self.new), NEWEST_SPAN: self.newest, SERVING_VERSION: self.serving_version,
                SERVING_SPANS: ",".join(self.serving_spans), CHANGED_SPANS: ",".join(self.changed_spans),
                NOTHING_NEW: self.why_not}


def span_digests(manifest: store.Manifest) -> dict[str, str]:
    """{span: digest of its source files' bytes and names} of a snapshot in span layout."""
    by_span: dict[str, list[store.FileEntry]] = {}
    for entry in manifest.files:
        source = dataclasses.replace(entry, sha256=entry.source_sha256 or entry.sha256)
        by_span.setdefault(entry.path.partition("/")[0], []).append(source)
    return {span: store.content_digest(entries) for span, entries in by_span.items()}


def check(newest: spans.Span, serving_dir: str, digests: Optional[Mapping[str, str]] = None,
          training_key: str = "") -> Newness:
    """New unless a version serves whose record names spans at least as new as `newest`, the source's newest
    ready span, none of the spans it was trained on changed since (`digests`: span_digests of now), and its
    training key (what else decides the model: training_key_of) is `training_key`.

    Compared with stable, then with the canary if one is out: a run never trains again what the canary is.
    Nothing serving, a version without a record (pushed before records were kept), one trained on a flat
    source or one whose record has no training key: new, there is nothing to compare with.
    """
    def judge(label: str, current, record) -> Optional[Newness]:
        if record is None or not record.spans:
            return None
        known = digests or {}
        changed = tuple(s for s in record.spans if s in known and s in record.span_digests
                        and known[s] != record.span_digests[s])
        seen = [spans.parse_name(s) for s in record.spans]
        # Numbered and dated spans don't compare: a source that changed layout is new data.
        comparable = all(len(k) == len(newest.key) for k in seen)
        new = (not comparable or newest.key > max(seen) or bool(changed)
               or not _same_training(record, training_key))
        return Newness(new, newest.name, current.name, record.spans, changed,
                       "" if new else f"no new span: the newest in the source is {newest.name}, and the {label} "
                                      f"(version {current.name}) was trained on {', '.join(record.spans)}")

    return _judged(serving_dir, Newness(True, newest.name), judge)


def check_flat(digest: str, serving_dir: str, training_key: str = "") -> Newness:
    """A flat source: new unless the version serving now (or the canary out) was trained on a snapshot of exactly
    this content (`digest`, the snapshot's content digest) with the same training key."""
    def judge(label: str, current, record) -> Optional[Newness]:
        if record is None or record.spans:
            return None
        new = record.snapshot_digest != digest or not _same_training(record, training_key)
        return Newness(new, serving_version=current.name,
                       why_not="" if new else f"the source is unchanged (snapshot {digest[:12]}) and so is the "
                                              f"training config: the {label} (version {current.name}) was trained "
                                              "on exactly this")

    return _judged(serving_dir, Newness(True), judge)


_LABEL_TEXT = {STABLE: "model serving now", CANARY: "canary"}


def _judged(serving_dir: str, default: Newness, judge) -> Newness:
    """The first answer that is "not new", judging stable, then the canary out (`judge(label text, version,
    record)`, None when that record cannot tell); else stable's answer, what the drift gate and the summary
    compare with; else `default`."""
    found = default
    for label, current, record in training_record.served_records(serving_dir) if serving_dir else []:
        answer = judge(_LABEL_TEXT[label], current, record)
        if answer is None:
            continue
        if label == STABLE:
            found = answer
        if not answer.new:
            return answer
    return found


def _same_training(record: training_record.Record, training_key: str) -> bool:
    # A record without a key (written before keys were kept) can't be compared: new, so nothing is skipped wrongly.
    return bool(record.training_key) and record.training_key == training_key


def training_key_of(config_digest: str, schema_file: Optional[str]) -> str:
    """What decides the model besides the data: the training config's digest (computed when the DAG is built)
    and the bytes of the schema file the run will import, read now."""
    schema = "inferred"
    if schema_file:
        from tfx.dsl.io import fileio

        with fileio.open(schema_file, "rb") as f:
            schema = hashlib.sha256(f.read()).hexdigest()
    return hashlib.sha256(f"{config_digest}\nschema {schema}".encode()).hexdigest()


def not_checked() -> Newness:
    """A pinned snapshot, or data.skip_when_no_new_span off: the run goes on."""
    return Newness(True)


def from_properties(properties: dict) -> Optional[Newness]:
    """What a DatasetSnapshot's properties say (None if it predates the check); numbers may come back as floats."""
    if NEW_SPAN not in properties:
        return None
    served, changed = (str(properties.get(k, "")) for k in (SERVING_SPANS, CHANGED_SPANS))
    return Newness(int(properties[NEW_SPAN]) == 1, str(properties.get(NEWEST_SPAN, "")),
                   str(properties.get(SERVING_VERSION, "")), tuple(s for s in served.split(",") if s),
                   tuple(s for s in changed.split(",") if s), str(properties.get(NOTHING_NEW, "")))
