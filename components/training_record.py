"""What each serving version was trained on, kept beside it in the serving directory.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Optional

from tfx.dsl.components.base import base_driver
from tfx.dsl.io import fileio
from tfx.proto.orchestration import driver_output_pb2

from components.serving import model_config, serving_dir
from components.storage import chunks, storage_for

RECORDS_DIR = ".training-data"
RECORD_FILE = "record.json"
# StatisticsGen's layout: <uri>/Split-<split>/FeatureStats.pb, a serialized DatasetFeatureStatisticsList.
TRAIN_SPLIT = "Split-train"
STATISTICS_FILE = "FeatureStats.pb"


@dataclasses.dataclass(frozen=True)
class Record:
    version: str
    path: str  # <serving_dir>/.training-data/<version>
    spans: tuple[str, ...]
    snapshot_digest: str
    snapshot_rows: Optional[int]
    statistics_uri: str  # where the statistics were copied from
    model_uri: str
    # {span: digest of its source files} (components/data/snapshot/newness.py); empty in records written before.
    span_digests: dict = dataclasses.field(default_factory=dict)
    # What else decided the model: training config and schema (newness.training_key_of); "" in older records.
    training_key: str = ""
    run: str = ""                     # the run that pushed it (a local run's id, or the pipeline job's name)
    metric: Optional[tuple[str, float]] = None  # the metric it was blessed on: (label, value)
    written: str = ""                 # when the Pusher wrote it (UTC, ISO 8601): when the version was pushed

    @property
    def statistics_path(self) -> str:
        return f"{self.path}/{TRAIN_SPLIT}/{STATISTICS_FILE}"

    def train_statistics(self):
        """The train split's DatasetFeatureStatisticsList."""
        from tensorflow_metadata.proto.v0 import statistics_pb2

        stats = statistics_pb2.DatasetFeatureStatisticsList()
        with fileio.open(self.statistics_path, "rb") as f:
            stats.ParseFromString(f.read())
        return stats

    def describe(self) -> str:
        spans = ",".join(self.spans) or "(flat)"
        return f"version {self.version}: spans {spans}, snapshot {self.snapshot_digest[:12] or '?'}"


def record_path(base: str, version: str) -> str:
    return f"{base.rstrip('/')}/{RECORDS_DIR}/{version}"


def write(base: str, version: int, statistics_uri: str, model_uri: str, spans: tuple[str, ...] = (),
          snapshot_digest: str = "", snapshot_rows: Optional[int] = None, gcs_client=None,
          span_digests: Optional[dict] = None, training_key: str = "", run: str = "",
          metric: Optional[tuple[str, float]] = None) -> str:
    """Write the record of version (claimed by this push, not yet visible) and return its path; the caller
    publishes afterwards."""
    path = record_path(base, str(version))
    store = storage_for(base, gcs_client)
    rel = f"{RECORDS_DIR}/{version}"
    store.delete(rel)  # left by an earlier attempt of this push (the version is claimed: nobody else's)
    stats = storage_for(f"{statistics_uri.rstrip('/')}/{TRAIN_SPLIT}", gcs_client)
    if not stats.exists(STATISTICS_FILE):
        raise FileNotFoundError(f"no train-split statistics at {stats.uri}/{STATISTICS_FILE}; "
                                "the Pusher's statistics input must be StatisticsGen's output")
    for name in stats.list():
        if "/" not in name:
            store.write(f"{rel}/{TRAIN_SPLIT}/{name}", chunks(stats, name))
    body = {"version": str(version), "spans": list(spans), "span_digests": dict(span_digests or {}),
            "snapshot_digest": snapshot_digest, "training_key": training_key, "run": run,
            "metric": list(metric) if metric else None,
            "snapshot_rows": snapshot_rows, "statistics_uri": statistics_uri, "model_uri": model_uri,
            "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # record.json last: a record without it is incomplete and read as none.
    store.write(f"{rel}/{RECORD_FILE}", iter([json.dumps(body, indent=1, sort_keys=True).encode()]))
    return path


def read(base: str, version: str, gcs_client=None) -> Optional[Record]:
    """The record of a version, or None when it has none (pushed before records were kept)."""
    path = record_path(base, version)
    store = storage_for(base, gcs_client)
    rel = f"{RECORDS_DIR}/{version}/{RECORD_FILE}"
    if not store.exists(rel):
        return None
    with store.open_read(rel) as f:
        body = json.loads(f.read())
    return Record(version=version, path=path, spans=tuple(body.get("spans") or ()),
                  snapshot_digest=body.get("snapshot_digest", ""), snapshot_rows=body.get("snapshot_rows"),
                  statistics_uri=body.get("statistics_uri", ""), model_uri=body.get("model_uri", ""),
                  span_digests=dict(body.get("span_digests") or {}), training_key=body.get("training_key", ""),
                  run=body.get("run", ""), metric=tuple(body["metric"]) if body.get("metric") else None,
                  written=body.get("written", ""))


def serving_record(base: str, gcs_client=None) -> tuple[Optional[serving_dir.Version], Optional[Record]]:
    """The version TF Serving serves now (None if none) and its record (None if it has none)."""
    current = serving_dir.serving(base, gcs_client)
    return current, (read(base, current.name, gcs_client) if current is not None else None)


def served_records(base: str, gcs_client=None) -> list[tuple[str, serving_dir.Version, Optional[Record]]]:
    """[(label, version, its record or None)] of stable and the canary out (when it is another version)."""
    served = serving_dir.served(base, gcs_client)
    stable = served.get(model_config.STABLE)
    return [(label, v, read(base, v.name, gcs_client)) for label, v in served.items()
            if label == model_config.STABLE or stable is None or v.number != stable.number]


def pushed_by(base: str, run: str, gcs_client=None) -> Optional[Record]:
    """The record of the version run `run` pushed, if it pushed one."""
    for version in reversed(serving_dir.versions(base, gcs_client)):
        record = read(base, version.name, gcs_client)
        if record is not None and run and record.run == run:
            return record
    return None


def serving_key(base: str, gcs_client=None) -> str:
    """Names what the drift gate would compare with now; changes whenever that changes (its local cache key)."""
    current, record = serving_record(base, gcs_client)
    if current is None:
        return "no serving version"
    return f"version {current.name}, " + ("record" if record is not None else "no record")


def has_baseline(key: str) -> bool:
    """Whether a serving_key names training data to compare with: a serving version and its record."""
    return key.endswith(", record")


# The parameter and driver-set property of a component that reads the serving dir at run time.
SERVING_DIR, SERVING_VERSION = "serving_dir", "serving_version"


class ServingVersionDriver(base_driver.BaseDriver):
    """Local runs: puts `serving_key(serving_dir)` into the `serving_version` execution property, part of
    the cache key, so a component reading the serving dir behind its fixed parameter misses once a push
    changed what serves. (TFX 1.16, tfx/orchestration/portable/launcher.py, `_prepare_execution`: a custom
    driver runs first and its exec properties are merged in, then the cache context is built from them.)
    Vertex runs no custom drivers: there such a component is never cached (pipeline/spec/cache_rule.py)."""

    def run(self, execution_info) -> driver_output_pb2.DriverOutput:
        result = driver_output_pb2.DriverOutput()
        result.exec_properties[SERVING_VERSION].string_value = serving_key(
            execution_info.exec_properties[SERVING_DIR])
        return result


def remove(base: str, version: int, gcs_client=None) -> None:
    storage_for(base, gcs_client).delete(f"{RECORDS_DIR}/{version}")


def prune(base: str, this_run: str, live_since: Optional[float], gcs_client=None,
          now: Optional[float] = None) -> list[str]:
    """Remove records of versions that do not exist (pushes killed between record and version) when they are
    debris (serving_dir.is_debris: this run's, or older than the live lease); says what it removed.

    A record whose version is still being pushed by another run is not debris: it is kept.
    """
    store = storage_for(base, gcs_client)
    present = {v.name for v in serving_dir.versions(base, gcs_client)}
    held = serving_dir.claims(base, gcs_client)
    removed = []
    for name in sorted({p.split("/")[1] for p in store.list(RECORDS_DIR)}):
        if name in present:
            continue
        claim = held.get(int(name)) if name.isdigit() else None
        if serving_dir.is_debris(claim, store.modified(f"{RECORDS_DIR}/{name}"), this_run, live_since, now):
            store.delete(f"{RECORDS_DIR}/{name}")
            removed.append(f"record of version {name} (its version never appeared)")
    return removed
