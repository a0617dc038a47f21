"""Which version serves under which label, and every move of a label: the push (direct or canary), promote and
rollback. No move deletes a version. Why and sources: docs/serving.md."""

from __future__ import annotations

import calendar
import dataclasses
import logging
import time
from typing import Callable, Optional

from components.errors import RolloutError
from components.serving import model_config, serving_dir
from components.serving.model_config import Labels
from components.storage import append_record, read_records, storage_for

EVENTS_DIR = ".rollout"  # one JSON object per label move, created once, never rewritten
DIRECT, CANARY = "direct", "canary"
# Past the poll interval: the server's reload itself reads the file (from GCS) and starts the loads.
RELOAD_MARGIN_SECONDS = 5.0


@dataclasses.dataclass(frozen=True)
class Reload:
    """The model servers of models.config: they reread it every `poll_seconds` (TF Serving's
    --model_config_file_poll_wait_seconds; 0: no server reads its labels, the track files carry none). A label
    moved onto a version they have not loaded takes two writes this far apart (model_config.onto_unloaded).
    `wait` sleeps; a test passes a model server's poll."""
    poll_seconds: float = 0.0
    wait: Callable[[float], None] = time.sleep

    def settle(self) -> None:
        self.wait(self.poll_seconds + RELOAD_MARGIN_SECONDS)


NO_SERVER = Reload()


@dataclasses.dataclass(frozen=True)
class Event:
    when: str              # UTC, ISO 8601
    action: str            # push | promote | rollback
    stable: Optional[int]  # the labels after the move ...
    canary: Optional[int]
    before_stable: Optional[int]  # ... and before it
    before_canary: Optional[int]
    by: str                # the run that pushed, or who ran the command
    note: str = ""

    def describe(self) -> str:
        def show(stable, canary):
            return f"stable {stable if stable is not None else '-'}, canary {canary if canary is not None else '-'}"
        return (f"{self.when} {self.action:<8} {show(self.before_stable, self.before_canary)} -> "
                f"{show(self.stable, self.canary)} (by {self.by}{'; ' + self.note if self.note else ''})")


def labels(base: str, gcs_client=None) -> Labels:
    """What serves under each label: models.config's labels; on a root without one (pushed before it was written)
    what TF Serving's default policy serves, the highest loadable version, as stable."""
    written = model_config.read(base, gcs_client)
    if written is not None:
        return written.labels
    current = serving_dir.highest(base, gcs_client)
    return Labels(current.number if current else None)


def events(base: str, gcs_client=None) -> list[Event]:
    """Every label move on this serving dir, oldest first."""
    return [Event(**r) for r in read_records(storage_for(base, gcs_client), EVENTS_DIR)]


def _move(base: str, model_name: str, action: str, after: Labels, by: str, note: str = "",
          gcs_client=None, before: Optional[Labels] = None, reload: Reload = NO_SERVER) -> Event:
    written = model_config.read(base, gcs_client)
    before = written.labels if written is not None else (before or labels(base, gcs_client))
    on_disk = {v.number for v in serving_dir.versions(base, gcs_client)}
    for version in after.versions():
        if version not in on_disk:
            raise RolloutError(f"version {version} is not a loadable version in {base}; nothing changed")
    unloaded = model_config.onto_unloaded(written, after) if reload.poll_seconds > 0 else ()
    if unloaded:  # first list them, and move the label once its servers have reread the file and started loading
        written = model_config.list_first(base, model_name, written, unloaded, gcs_client)
        logging.info("serving labels: listed version(s) %s in %s; moving the label after its servers' poll "
                     "(%g s)", ", ".join(map(str, unloaded)), model_config.CONFIG_FILE, reload.poll_seconds)
        reload.settle()
    model_config.write(base, model_name, after, written, gcs_client)
    event = Event(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), action, after.stable, after.canary,
                  before.stable, before.canary, by, note)
    append_record(storage_for(base, gcs_client), EVENTS_DIR, dataclasses.asdict(event))
    return event


def after_push(base: str, model_name: str, version: int, rollout: str, run: str, gcs_client=None,
               reload: Reload = NO_SERVER) -> Event:
    """Label a version just published: direct, it is stable (a canary out is dropped); canary, it is the canary
    (replacing one out) while stable keeps serving, unless nothing is stable yet."""
    current = before_push(base, version, gcs_client)
    if rollout == CANARY and current.stable is not None and current.stable != version:
        return _move(base, model_name, "push", Labels(current.stable, version), run, "as canary", gcs_client, current,
                     reload)
    if rollout not in (DIRECT, CANARY):
        raise RolloutError(f"serving.rollout {rollout!r}: expected {DIRECT} or {CANARY}")
    return _move(base, model_name, "push", Labels(version), run,
                 "direct" if rollout == DIRECT else "first version: stable", gcs_client, current, reload)


def before_push(base: str, version: int, gcs_client=None) -> Labels:
    """The labels a push of `version` (just published) starts from: models.config's; on a root from before model
    configs, what served until this version appeared, the highest before it, as stable."""
    written = model_config.read(base, gcs_client)
    if written is not None:
        return written.labels
    older = [v.number for v in serving_dir.versions(base, gcs_client) if v.number < version]
    return Labels(max(older) if older else None)


def promote(base: str, model_name: str, by: str, gcs_client=None, why: str = "", reload: Reload = NO_SERVER) -> Event:
    current = labels(base, gcs_client)
    if current.canary is None:
        raise RolloutError(f"no canary is out in {base} (stable is {current.stable}); nothing to promote")
    return _move(base, model_name, "promote", Labels(current.canary), by,
                 f"canary {current.canary} is stable" + (f": {why}" if why else ""), gcs_client, reload=reload)


def rollback(base: str, model_name: str, by: str, to: Optional[int] = None, gcs_client=None,
             why: str = "", reload: Reload = NO_SERVER) -> Event:
    """With a canary out: drop it, stable stays. Without: the stable before this one (or `to`) is stable again."""
    current = labels(base, gcs_client)
    back = rolled_back_to(base, to, gcs_client, current)
    if to is not None:
        return _move(base, model_name, "rollback", Labels(to), by, f"to version {to}", gcs_client, reload=reload)
    if back is None:
        return _move(base, model_name, "rollback", Labels(current.stable), by,
                     f"canary {current.canary} dropped" + (f": {why}" if why else ""), gcs_client, reload=reload)
    return _move(base, model_name, "rollback", Labels(back), by, f"stable {current.stable} rolled back",
                 gcs_client, reload=reload)


def rolled_back_to(base: str, to: Optional[int] = None, gcs_client=None,
                   current: Optional[Labels] = None) -> Optional[int]:
    """The version a rollback makes stable: `to`, or with no canary out the stable before this one; None: the
    canary out is dropped and stable stays. `current`: the labels, when the caller has read them."""
    if to is not None:
        return to
    current = current or labels(base, gcs_client)
    if current.canary is not None:
        return None
    earlier = previous_stable(base, current.stable, gcs_client)
    if earlier is None:
        raise RolloutError(f"no stable version before {current.stable} in {base}'s label history; "
                           "name one with --to VERSION")
    return earlier


def canary_since(base: str, gcs_client=None) -> float:
    """When the canary out now went out (unix seconds): the label move that made it canary; without one in the
    history (a config written by hand, a history lost), the push its training record gives. RolloutError when
    neither says: a window from the epoch is no window (Cloud Monitoring refuses one over 104 weeks)."""
    canary = labels(base, gcs_client).canary
    pushed = [e for e in events(base, gcs_client) if e.canary == canary and e.before_canary != canary]
    if pushed:
        return _seconds(pushed[-1].when)
    from components import training_record  # it imports TFX, which nothing else here needs

    record = training_record.read(base, str(canary), gcs_client) if canary is not None else None
    if record is None or not record.written:
        raise RolloutError(f"canary {canary} in {base}: neither the label history ({EVENTS_DIR}/) nor its training "
                           "record says when it went out; nothing decided")
    return _seconds(record.written)


def _seconds(utc: str) -> float:
    return float(calendar.timegm(time.strptime(utc, "%Y-%m-%dT%H:%M:%SZ")))


def previous_stable(base: str, stable: Optional[int], gcs_client=None) -> Optional[int]:
    """The stable version before `stable` in the label history that is still on disk."""
    on_disk = {v.number for v in serving_dir.versions(base, gcs_client)}
    history = [e.stable for e in events(base, gcs_client) if e.stable is not None]
    seen = False
    for version in reversed(history):
        if version == stable:
            seen = True
        elif seen and version in on_disk:
            return version
    return None
