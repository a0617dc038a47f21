"""BulkInferrer, after the Pusher: scores a snapshot of inference.input_dir with the model just pushed, or the
one serving when nothing was pushed, as `python -m pipeline predict` scores (components/scoring/)."""

from __future__ import annotations

import json
import logging
import os
import posixpath
from typing import Any, Optional

from tfx import types
from tfx.dsl.components.base import base_beam_component, base_beam_executor, executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact, artifact_utils, component_spec, standard_artifacts
from tfx.utils import io_utils, path_utils

from components.data.csv_examples import csv_files
from components.data.snapshot import store
from components.data.snapshot.component import SNAPSHOT_KEY, SPAN_DIGESTS, DatasetSnapshot, snapshot_dir, spans_of
from components.scoring import ledger
from components.scoring.job import SUMMARY_FILE, InputFile, score_files
from components.scoring.keys import (
    MODEL_PATH,
    MODEL_VERSION,
    PREDICTIONS_TYPE,
    REJECTED,
    ROWS,
    SCORED,
    SCORED_SPANS,
    SKIPPED_SPANS,
    SNAPSHOT_DIGEST,
)
from components.scoring.plan import plan
from components.serving import serving_model
from trainer.feature_config import FeatureConfig

PREDICTIONS_KEY, PUSHED_MODEL_KEY, SERVING_MODEL_KEY, SCHEMA_KEY = "predictions", "pushed_model", "serving_model", \
    "schema"
FEATURES, KEEP, FORMAT, CHUNK_ROWS, MISSING_VALUES, LEDGER_DIR = "features", "keep", "format", "chunk_rows", \
    "missing_values", "ledger_dir"


class Predictions(artifact.Artifact):
    """Scored rows: one file per input file (per span), rejects.csv and summary.json; custom properties name
    the model version and the snapshot (a custom type named `<namespace>.<Name>` for Vertex, as DatasetSnapshot)."""
    TYPE_NAME = PREDICTIONS_TYPE


class BulkInferrerSpec(types.ComponentSpec):
    INPUTS = {
        SNAPSHOT_KEY: component_spec.ChannelParameter(type=DatasetSnapshot),
        SCHEMA_KEY: component_spec.ChannelParameter(type=standard_artifacts.Schema),
        PUSHED_MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.PushedModel),
        SERVING_MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
    }
    PARAMETERS = {
        FEATURES: component_spec.ExecutionParameter(type=str),   # the features section, JSON
        KEEP: component_spec.ExecutionParameter(type=str),       # predict.keep, JSON (null: features.ignore)
        FORMAT: component_spec.ExecutionParameter(type=str),
        CHUNK_ROWS: component_spec.ExecutionParameter(type=int),
        MISSING_VALUES: component_spec.ExecutionParameter(type=str),  # JSON list
        LEDGER_DIR: component_spec.ExecutionParameter(type=str),      # components/scoring/ledger.py
    }
    OUTPUTS = {PREDICTIONS_KEY: component_spec.ChannelParameter(type=Predictions)}


def model_to_use(pushed: types.Artifact, serving: types.Artifact) -> Optional[tuple[str, str]]:
    """(version, SavedModel dir): the push of this run, else the model that was serving when the run began."""
    if pushed.has_custom_property("pushed") and pushed.get_int_custom_property("pushed") == 1:
        return pushed.get_string_custom_property("pushed_version"), pushed.uri  # the Pusher copies the model there
    if serving_model.is_empty(serving):
        return None
    return (serving.get_string_custom_property(serving_model.SERVING_VERSION),
            path_utils.serving_model_dir(serving.uri))


def units_of(snapshot: types.Artifact) -> dict[str, str]:
    """{span or ledger.FLAT: content digest} of a DatasetSnapshot."""
    spans = spans_of(snapshot)
    if not spans:
        return {ledger.FLAT: snapshot.get_string_custom_property("digest")}
    digests = json.loads(snapshot.get_string_custom_property(SPAN_DIGESTS) or "{}")
    return {span: digests.get(span, "") for span in spans}


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        snapshot = artifact_utils.get_single_instance(input_dict[SNAPSHOT_KEY])
        out = artifact_utils.get_single_instance(output_dict[PREDICTIONS_KEY])
        out.set_string_custom_property(SNAPSHOT_DIGEST, snapshot.get_string_custom_property("digest"))
        chosen = model_to_use(artifact_utils.get_single_instance(input_dict[PUSHED_MODEL_KEY]),
                              artifact_utils.get_single_instance(input_dict[SERVING_MODEL_KEY]))
        units = units_of(snapshot)
        todo, done = ledger.unscored(units, exec_properties[LEDGER_DIR])
        out.set_string_custom_property(SKIPPED_SPANS, ",".join(done))
        summary = {"model_version": chosen[0] if chosen else "", "snapshot": snapshot.get_string_custom_property(
            "digest"), "scored_spans": todo if chosen else [], "skipped_spans": done, "rows": 0, "scored": 0,
            "rejected": 0}
        if chosen is None or not todo:
            logging.info("BulkInferrer: nothing to score (%s)", "no model pushed or serving" if chosen is None
                         else f"every span scored before: {', '.join(done)}")
        else:
            schema = io_utils.SchemaReader().read(os.path.join(
                artifact_utils.get_single_uri(input_dict[SCHEMA_KEY]), "schema.pbtxt"))
            summary.update(self._score(snapshot, schema, todo, chosen, exec_properties, out.uri))
            ledger.mark_scored(exec_properties[LEDGER_DIR], {u: units[u] for u in todo}, chosen[0], out.uri)
        out.set_string_custom_property(MODEL_VERSION, summary["model_version"])
        out.set_string_custom_property(MODEL_PATH, chosen[1] if chosen else "")
        out.set_string_custom_property(SCORED_SPANS, ",".join(summary["scored_spans"]))
        for key in (ROWS, SCORED, REJECTED):
            out.set_int_custom_property(key, summary[key])
        with fileio.open(os.path.join(out.uri, SUMMARY_FILE), "w") as f:
            f.write(json.dumps(summary, indent=1, sort_keys=True))

    def _score(self, snapshot: types.Artifact, schema, todo: list[str], chosen: tuple[str, str],
               exec_properties: dict[str, Any], output_uri: str) -> dict:
        data = f"{snapshot_dir(snapshot)}/{store.DATA_DIR}"
        files = []
        for unit in todo:
            directory = data if unit == ledger.FLAT else f"{data}/{unit}"
            header, paths = csv_files(directory, "*")
            prefix = "" if unit == ledger.FLAT else f"{unit}/"
            files += [InputFile(p, tuple(header), prefix + posixpath.splitext(posixpath.basename(p))[0])
                      for p in paths]
        # The version's own record of its inputs; this run's schema and features for one pushed before it.
        features = FeatureConfig.model_validate_json(exec_properties[FEATURES])
        columns, layout = plan(chosen[1], json.loads(exec_properties[KEEP]),
                               json.loads(exec_properties[MISSING_VALUES]), exec_properties[FORMAT], schema, features)
        counts = score_files(files, columns, chosen[1], layout, output_uri, self._make_beam_pipeline,
                             int(exec_properties[CHUNK_ROWS]))
        logging.info("BulkInferrer: scored %d of %d rows of spans %s with version %s (%d rejected)", counts.scored,
                     counts.rows, ",".join(todo), chosen[0], counts.rejected)
        return counts.as_dict()


class BulkInferrer(base_beam_component.BaseBeamComponent):
    """TFX's BulkInferrer's place in the DAG, on raw CSV rows instead of Examples, writing the kept columns
    beside the outputs (TFX's writes PredictionLogs without them, tensorflow/community#417)."""

    SPEC_CLASS = BulkInferrerSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, snapshot: types.BaseChannel, schema: types.BaseChannel, pushed_model: types.BaseChannel,
                 serving_model: types.BaseChannel, features: FeatureConfig, keep: Optional[list[str]],
                 format: str, chunk_rows: int, missing_values: list[str], ledger_dir: str):
        super().__init__(spec=BulkInferrerSpec(
            snapshot=snapshot, schema=schema, pushed_model=pushed_model, serving_model=serving_model,
            features=features.model_dump_json(), keep=json.dumps(keep), format=format, chunk_rows=chunk_rows,
            missing_values=json.dumps(list(missing_values)), ledger_dir=ledger_dir,
            predictions=types.Channel(type=Predictions)))
