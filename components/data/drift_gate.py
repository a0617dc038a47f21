"""DriftGate: stop the run when the newest data drifted from what the serving model learned.
Why and sources: docs/internals.md."""


import dataclasses
import json
import logging
import math
import os
import posixpath
from typing import Any, Optional

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2
from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.dsl.io import fileio
from tfx.types import component_spec
from tfx.types.standard_artifacts import Schema
from tfx.utils import io_utils

from components import training_record
from components.data.snapshot.component import DatasetSnapshot, spans_of
from components.data.snapshot.store import DATA_DIR, DIGEST_RE
from components.errors import DataDriftError

_MEASURE = {anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY: "L-infinity",
            anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE: "Jensen-Shannon"}


@dataclasses.dataclass(frozen=True)
class Drift:
    feature: str
    measure: str
    distance: float
    threshold: float

    @property
    def drifted(self) -> bool:
        return self.distance > self.threshold

    def __str__(self) -> str:
        return f"feature {self.feature}: {self.measure} distance {self.distance:.3f} > threshold {self.threshold:g}"


def gated_features(features_json: str, schema: schema_pb2.Schema, roles: Optional[dict] = None) -> dict[str, str]:
    """{column: "numeric" | "categorical"} for the label and every model input: the features
    section (JSON) resolved against the schema's columns, as Transform and the Trainer resolve it, with the
    column roles (trainer/roles.py) inferred from the newest data: ids and free text are no model input, and a
    date is not gated (new data has new dates by nature)."""
    from tensorflow_transform.tf_metadata import schema_utils

    from trainer.feature_config import FeatureConfig, resolve
    from trainer.features import column_types

    resolved = resolve(FeatureConfig.model_validate_json(features_json),
                       column_types(schema_utils.schema_as_feature_spec(schema).feature_spec), roles)
    gated = {resolved.label: "numeric" if resolved.task == "regression" else "categorical"}
    gated.update({f.name: "numeric" for f in resolved.numeric})
    gated.update({f.name: "categorical" for f in (*resolved.categorical, *resolved.boolean)})
    return gated


def roles_of(frame, schema: schema_pb2.Schema, features_json: str) -> dict:
    """The column roles of the newest data, from rows spread over it (as Transform infers them on its training
    split, components/data/column_roles.py sample; the label's rows included)."""
    from trainer import roles
    from trainer.feature_config import FeatureConfig, columns_from_schema

    config = FeatureConfig.model_validate_json(features_json)
    head = frame.iloc[::max(1, math.ceil(len(frame) / roles.SAMPLE_ROWS))].reset_index(drop=True)
    present = {name: head[name].notna().to_numpy() for name in head.columns}
    return roles.infer((roles.Sample(name, kind, head[name][present[name]].tolist(), len(head),
                                     present[name].nonzero()[0].tolist())
                        for name, kind in columns_from_schema(schema).items() if name in head.columns),
                       config.label, config.task, config.positive_class)


def with_comparators(schema: schema_pb2.Schema, gated: dict[str, str], numeric: float, categorical: float,
                     per_feature: dict[str, float]) -> schema_pb2.Schema:
    """A copy of schema with a drift comparator on each gated feature; per_feature thresholds win."""
    unknown = sorted(set(per_feature) - set(gated))
    if unknown:
        raise ValueError(f"drift_gate.thresholds names columns the model does not use: {unknown} "
                         f"(gated: {', '.join(sorted(gated))})")
    out = schema_pb2.Schema()
    out.CopyFrom(schema)
    for feature in out.feature:
        kind = gated.get(feature.name)
        if kind == "numeric":
            feature.drift_comparator.jensen_shannon_divergence.threshold = per_feature.get(feature.name, numeric)
        elif kind == "categorical":
            feature.drift_comparator.infinity_norm.threshold = per_feature.get(feature.name, categorical)
    return out


def measure(newest: statistics_pb2.DatasetFeatureStatisticsList, baseline: statistics_pb2.DatasetFeatureStatisticsList,
            schema: schema_pb2.Schema) -> list[Drift]:
    """Every feature's drift measurement, drifted or not, by feature name."""
    import tensorflow_data_validation as tfdv

    anomalies = tfdv.validate_statistics(newest, schema, previous_statistics=baseline)
    found = [Drift(".".join(info.path.step), _MEASURE.get(m.type, str(m.type)), m.value, m.threshold)
             for info in anomalies.drift_skew_info for m in info.drift_measurements]
    return sorted(found, key=lambda d: d.feature)


def check(found: list[Drift], accepted: frozenset[str]) -> None:
    for d in found:
        if d.drifted and d.feature in accepted:
            logging.warning("drift gate: drift accepted by override: %s", d)
    blocking = [d for d in found if d.drifted and d.feature not in accepted]
    if blocking:
        lines = [f"the newest data drifted from the serving model's training data in {len(blocking)} "
                 f"feature{'s' if len(blocking) > 1 else ''}; stopping before Transform and Trainer:"]
        lines += [f"  {d}" for d in blocking]
        lines.append("Find out why (a unit change, a new source, a broken upstream job?). To train on it after review, "
                     f"rerun with --set drift_gate.accepted='[{','.join(d.feature for d in blocking)}]'; thresholds "
                     "are drift_gate.numeric_threshold, categorical_threshold and thresholds (per feature).")
        raise DataDriftError("\n".join(lines))


def newest_statistics(snapshot_uri: str, spans: tuple[str, ...]) -> statistics_pb2.DatasetFeatureStatisticsList:
    return statistics_of(newest_frame(snapshot_uri, spans))


def statistics_of(frame) -> statistics_pb2.DatasetFeatureStatisticsList:
    import tensorflow_data_validation as tfdv

    return tfdv.generate_statistics_from_dataframe(frame)


def newest_frame(snapshot_uri: str, spans: tuple[str, ...]):
    """The newest span's rows (the whole snapshot of a flat source), typed as ExampleGen types them."""
    return rows_of(snapshot_uri, tuple(spans)[-1:])


def rows_of(snapshot_uri: str, spans: tuple[str, ...]):
    """Every row of these spans of a snapshot (of the whole snapshot for a flat source), typed as ExampleGen
    types them."""
    import pandas as pd

    tops = [os.path.join(snapshot_uri, DATA_DIR, span) for span in spans] or [os.path.join(snapshot_uri, DATA_DIR)]
    frames = []
    for path in sorted(p for top in tops for p in fileio.glob(os.path.join(top, "*.csv"))):
        with fileio.open(path) as f:
            # As TFX's CSV decoder reads it: only an empty cell is missing (the snapshot emptied the
            # data.missing_values tokens), not pandas's own list ("NA", "null", ...).
            # As text first: pandas would make true/false cells booleans (numbers to TFDV), where ExampleGen
            # keeps them strings; a column is numbers only when every present cell is one, as for TFX.
            frames.append(pd.read_csv(f, keep_default_na=False, na_values=[""], dtype=str))
    frame = pd.concat(frames, ignore_index=True)
    for name in frame.columns:
        try:
            frame[name] = pd.to_numeric(frame[name])
        except (ValueError, TypeError):
            pass
    return frame


def baseline_statistics(record: training_record.Record,
                        snapshot_uri: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    """What the serving version trained on, read the way the newest data is read: every row of its snapshot's
    spans, when that snapshot is still in this run's store; else its record's train-split statistics."""
    baseline_uri = f"{posixpath.dirname(snapshot_uri.rstrip('/'))}/{record.snapshot_digest}"
    if DIGEST_RE.match(record.snapshot_digest) and fileio.exists(os.path.join(baseline_uri, DATA_DIR)):
        logging.info("drift gate: baseline: the rows of snapshot %s", baseline_uri)
        return statistics_of(rows_of(baseline_uri, record.spans))
    logging.info("drift gate: baseline: the train-split statistics in the record (snapshot %s is not in the store)",
                 record.snapshot_digest[:12] or "?")
    return record.train_statistics()


SNAPSHOT, SCHEMA = "snapshot", "schema"
THRESHOLDS, ACCEPTED, FEATURES = "thresholds", "accepted", "features"
SERVING_DIR, SERVING_VERSION = training_record.SERVING_DIR, training_record.SERVING_VERSION


class DriftGateSpec(types.ComponentSpec):
    PARAMETERS = {
        # The directory TF Serving watches (pipeline.serving_dir); the baseline is found there at run time.
        SERVING_DIR: component_spec.ExecutionParameter(type=str),
        # JSON {"numeric": x, "categorical": y, "features": {name: t}}: DriftGateSection.as_json().
        THRESHOLDS: component_spec.ExecutionParameter(type=str),
        # Comma-separated features whose drift a person accepted for this run.
        ACCEPTED: component_spec.ExecutionParameter(type=str, optional=True),
        # The config's features section as JSON: which columns to gate.
        FEATURES: component_spec.ExecutionParameter(type=str),
        # Set by the driver at run time (local runs): part of the cache key, see the module docstring.
        SERVING_VERSION: component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        SNAPSHOT: component_spec.ChannelParameter(type=DatasetSnapshot),
        SCHEMA: component_spec.ChannelParameter(type=Schema),
    }
    OUTPUTS = {}


class DriftGateExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        base = exec_properties[SERVING_DIR]
        current, record = training_record.serving_record(base)
        if current is None:
            logging.info("drift gate: no model serving in %s yet; nothing to compare", base)
            return
        if record is None:
            logging.info("drift gate: serving version %s has no training-data record (pushed before records "
                         "were kept); nothing to compare", current.name)
            return
        logging.info("drift gate: comparing with the training data of serving %s", record.describe())
        snapshot = input_dict[SNAPSHOT][0]
        limits = json.loads(exec_properties[THRESHOLDS])
        raw_schema = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(input_dict[SCHEMA][0].uri))
        spans = spans_of(snapshot)
        snapshot_uri = snapshot.get_string_custom_property("snapshot_uri")
        frame = newest_frame(snapshot_uri, spans)
        gated = gated_features(exec_properties[FEATURES], raw_schema,
                               roles_of(frame, raw_schema, exec_properties[FEATURES]))
        compared = with_comparators(raw_schema, gated, limits["numeric"], limits["categorical"], limits["features"])
        found = measure(statistics_of(frame), baseline_statistics(record, snapshot_uri), compared)
        for d in found:
            logging.info("drift gate: %s %s distance %.3f (threshold %g)", d.feature, d.measure, d.distance,
                         d.threshold)
        check(found, frozenset(filter(None, (exec_properties.get(ACCEPTED) or "").split(","))))


class DriftGate(base_component.BaseComponent):
    SPEC_CLASS = DriftGateSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(DriftGateExecutor)
    DRIVER_CLASS = training_record.ServingVersionDriver

    def __init__(self, snapshot: types.BaseChannel, schema: types.BaseChannel, serving_dir: str,
                 features: str, thresholds: str, accepted: str = ""):
        super().__init__(DriftGateSpec(snapshot=snapshot, schema=schema, serving_dir=serving_dir,
                                       thresholds=thresholds, accepted=accepted, features=features))
