"""DatasetSnapshot: the first step of the DAG, freezing the raw input by content. Why: docs/internals.md."""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Optional, Sequence

from tfx import types
from tfx.dsl.components.base import base_component, base_driver, base_executor, executor_spec
from tfx.dsl.io import fileio
from tfx.proto.orchestration import driver_output_pb2
from tfx.types import artifact, component_spec, standard_artifacts
from tfx.types.system_executions import Process

from components import training_record
from components.data.snapshot import newness, spans, store

SOURCE_URI, SNAPSHOTS_ROOT, DIGEST, FINGERPRINT = "source_uri", "snapshots_root", "digest", "source_fingerprint"
SPANS = "spans"
SPAN_READY_MARKER = "span_ready_marker"
WAITING_SPANS = "waiting_spans"  # spans left out because their ready marker is missing, comma-separated
SPAN_DIGESTS = "span_digests"    # JSON {span: content digest} of the spans in the snapshot
MISSING_VALUES = "missing_values"
SERVING_DIR, SKIP_WHEN_NO_NEW_SPAN = "serving_dir", "skip_when_no_new_span"
TRAINING_CONFIG, SCHEMA_FILE = "training_config", "schema_file"
CHECK_CSV = "check_csv"
TRAINING_KEY = "training_key"  # newness.training_key_of: on the DatasetSnapshot, copied into the push's record
SNAPSHOT_KEY = "snapshot"
# 1: the run has something to train on (or did not check), 0: nothing new. The same decision as the
# DatasetSnapshot's new_span property, as a value artifact: compiled for Vertex and Kubeflow it is also the
# task's output parameter, which the condition around the rest of the DAG reads (pipeline/spec/condition_group.py).
NEW_DATA_KEY = "new_data"
SNAPSHOT_URI = "snapshot_uri"


class DatasetSnapshot(artifact.Artifact):
    """A published snapshot; its directory holds a copy of the manifest."""

    # Vertex (KFP v2) wants custom artifact types named `<namespace>.<Name>`
    # and no typed PROPERTIES, so the digest, row count, source, location and
    # creation time are MLMD custom properties. TFX's Vertex entrypoint finds
    # the class again by importing that name as `<module>.<Class>`
    # (kubeflow_v2_entrypoint_utils), so the namespace is the top-level package,
    # which exports the class (components/__init__.py).
    TYPE_NAME = "components.DatasetSnapshot"


class SnapshotSpec(types.ComponentSpec):
    PARAMETERS = {
        SOURCE_URI: component_spec.ExecutionParameter(type=str),
        SNAPSHOTS_ROOT: component_spec.ExecutionParameter(type=str),
        # Pinned: reuse this published snapshot instead of reading the source.
        DIGEST: component_spec.ExecutionParameter(type=str, optional=True),
        # all | latest | window(k) for a source in span layout (spans.py); empty for a flat source.
        SPANS: component_spec.ExecutionParameter(type=str, optional=True),
        # With SPANS: a span counts only once it holds this file (spans.py); empty: every span counts.
        SPAN_READY_MARKER: component_spec.ExecutionParameter(type=str, optional=True),
        # Set by the driver at run time; part of the cache key.
        FINGERPRINT: component_spec.ExecutionParameter(type=str, optional=True),
        # JSON list of CSV cell values stored as empty (missing) cells.
        MISSING_VALUES: component_spec.ExecutionParameter(type=str, optional=True),
        # With SKIP_WHEN_NO_NEW_SPAN=1 (and SPANS, no DIGEST), the newest span is compared with the
        # training-data record of the version serving in SERVING_DIR (newness.py).
        SERVING_DIR: component_spec.ExecutionParameter(type=str, optional=True),
        SKIP_WHEN_NO_NEW_SPAN: component_spec.ExecutionParameter(type=int, optional=True),
        # The digest of the config sections that decide the model (pipeline/dag/conditions.py), and the schema
        # file the run imports: with the data, what the serving version's record is compared with.
        TRAINING_CONFIG: component_spec.ExecutionParameter(type=str, optional=True),
        SCHEMA_FILE: component_spec.ExecutionParameter(type=str, optional=True),
        # 0: publish files ExampleGen could not read (ragged rows, differing headers) without refusing them: for
        # scoring input, whose reader rejects such rows one by one (components/scoring/rows.py). Unset: refuse.
        CHECK_CSV: component_spec.ExecutionParameter(type=int, optional=True),
    }
    INPUTS = {}
    OUTPUTS = {
        SNAPSHOT_KEY: component_spec.ChannelParameter(type=DatasetSnapshot),
        NEW_DATA_KEY: component_spec.ChannelParameter(type=standard_artifacts.Integer),
    }
    TYPE_ANNOTATION = Process


def snapshot_dir(snapshot: types.Artifact) -> str:
    """The snapshot's directory, <snapshots_root>/<digest>, as the Snapshot step recorded it on the artifact."""
    uri = snapshot.get_string_custom_property(SNAPSHOT_URI) if snapshot.has_custom_property(SNAPSHOT_URI) else ""
    if not uri:
        raise store.SnapshotError(f"the DatasetSnapshot at {snapshot.uri} has no {SNAPSHOT_URI} property: "
                                  "it was not written by the Snapshot step")
    return uri


def spans_of(snapshot: types.Artifact) -> tuple[str, ...]:
    """The span directories a DatasetSnapshot covers, oldest first (none for a flat source)."""
    return tuple(s for s in snapshot.get_string_custom_property(SPANS).split(",") if s)


class SnapshotDriver(base_driver.BaseDriver):
    def run(self, execution_info) -> driver_output_pb2.DriverOutput:
        props = execution_info.exec_properties
        result = driver_output_pb2.DriverOutput()
        key = f"pinned:{props[DIGEST]}" if props.get(DIGEST) else store.fingerprint(props[SOURCE_URI])
        if _checks_newness(props):
            # The schema file is read behind its fixed path: an edit of it must miss too.
            key += (f"; serving: {training_record.serving_key(props[SERVING_DIR])}"
                    f"; training: {_training_key(props)}")
        result.exec_properties[FINGERPRINT].string_value = key
        return result


def _checks_newness(props: dict[str, Any]) -> bool:
    return bool(props.get(SKIP_WHEN_NO_NEW_SPAN) and not props.get(DIGEST))


def _training_key(props: dict[str, Any]) -> str:
    return newness.training_key_of(props.get(TRAINING_CONFIG) or "", props.get(SCHEMA_FILE) or None)


class SnapshotExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        root = exec_properties[SNAPSHOTS_ROOT]
        pinned: Optional[str] = exec_properties.get(DIGEST) or None
        source, selection = exec_properties[SOURCE_URI], exec_properties.get(SPANS) or None
        tokens = json.loads(exec_properties.get(MISSING_VALUES) or "[]")
        found, waiting = newness.not_checked(), []
        training_key = _training_key(exec_properties)
        if pinned:
            manifest = store.get(root, pinned)
        elif selection:
            # Decided now, from what has landed (complete) in the source by the time this run gets here.
            marker = exec_properties.get(SPAN_READY_MARKER) or None
            listed = spans.list_spans(source, marker=marker)
            waiting = [s.name for s in spans.waiting(listed)]
            if waiting:
                logging.warning("spans %s have no %s marker yet (still being written?); this run leaves them out",
                                ", ".join(waiting), marker)
            chosen = spans.select(listed, selection, source, marker)
            manifest = store.create(source, root, spans=tuple(s.name for s in chosen), missing_values=tokens,
                                    leave_out=(marker,) if marker else ())
            if _checks_newness(exec_properties):
                found = newness.check(chosen[-1], exec_properties[SERVING_DIR], newness.span_digests(manifest),
                                      training_key)
        else:
            manifest = store.create(source, root, missing_values=tokens)
            if _checks_newness(exec_properties):
                found = newness.check_flat(manifest.digest, exec_properties[SERVING_DIR], training_key)
        problems = store.csv_problems(manifest) if exec_properties.get(CHECK_CSV) != 0 else []
        if problems:
            raise store.SnapshotError(
                f"snapshot {manifest.digest} of {manifest.source_uri} has malformed CSV; ExampleGen cannot read it:\n"
                + "\n".join(f"  {p}" for p in problems))
        out = output_dict[SNAPSHOT_KEY][0]
        out.set_string_custom_property("digest", manifest.digest)
        out.set_int_custom_property("rows", manifest.rows)
        out.set_string_custom_property("source_uri", manifest.source_uri)
        out.set_string_custom_property(SNAPSHOT_URI, manifest.uri)
        out.set_string_custom_property("created", manifest.created)
        out.set_string_custom_property(SPANS, ",".join(manifest.spans))
        out.set_string_custom_property(WAITING_SPANS, ",".join(waiting))
        out.set_string_custom_property(SPAN_DIGESTS, json.dumps(newness.span_digests(manifest) if manifest.spans
                                                                else {}, sort_keys=True))
        out.set_string_custom_property("missing_values", json.dumps(list(manifest.missing_values)))
        out.set_int_custom_property("emptied_cells", sum(sum(f.emptied.values()) for f in manifest.files))
        out.set_string_custom_property(TRAINING_KEY, training_key)
        for name, value in found.properties().items():
            (out.set_int_custom_property if isinstance(value, int) else out.set_string_custom_property)(name, value)
        with fileio.open(os.path.join(out.uri, store.MANIFEST), "w") as f:
            f.write(manifest.to_json())
        output_dict[NEW_DATA_KEY][0].value = int(found.new)


class Snapshot(base_component.BaseComponent):
    SPEC_CLASS = SnapshotSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(SnapshotExecutor)
    DRIVER_CLASS = SnapshotDriver

    def __init__(self, source_uri: str, snapshots_root: str, digest: Optional[str] = None,
                 span_selection: Optional[str] = None, missing_values: Sequence[str] = (),
                 serving_dir: Optional[str] = None, skip_when_no_new_span: bool = False,
                 span_ready_marker: Optional[str] = None, training_config: str = "",
                 schema_file: Optional[str] = None, check_csv: bool = True):
        super().__init__(SnapshotSpec(
            source_uri=source_uri, snapshots_root=snapshots_root, digest=digest or None,
            spans=span_selection or None, span_ready_marker=span_ready_marker or None,
            missing_values=json.dumps(list(missing_values)),
            serving_dir=serving_dir or None, skip_when_no_new_span=int(skip_when_no_new_span),
            training_config=training_config or None, schema_file=schema_file or None,
            check_csv=None if check_csv else 0,
            snapshot=types.Channel(type=DatasetSnapshot), new_data=types.Channel(type=standard_artifacts.Integer)))
