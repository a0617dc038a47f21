"""The inference steps after the Pusher (inference.input_dir): a Snapshot of the directory and the BulkInferrer
that scores it (components/bulk_inferrer.py, docs/predict.md)."""

from __future__ import annotations

from tfx.dsl.components.base.base_node import BaseNode

from components.data.snapshot.component import SNAPSHOT_KEY, Snapshot
from components.scoring.keys import BULK_INFERRER_ID, INFERENCE_SNAPSHOT_ID
from pipeline.config import Config, join, resolve


def ledger_dir(config: Config) -> str:
    """Where the spans scored so far are recorded (components/scoring/ledger.py); no TFX node is named so."""
    return join(config.pipeline.pipeline_root, "scored_spans")


def inference_steps(config: Config, schema, pushed_model, serving_model) -> list[BaseNode]:
    """[] without inference.input_dir. Its spans are laid out as data.input_dir's: every complete span is in the
    snapshot, and the BulkInferrer scores those it did not score before."""
    if not config.inference.input_dir:
        return []
    config.predict.check_backend()
    from components.bulk_inferrer import BulkInferrer  # Beam's RunInference: only for a run that scores

    snapshot = Snapshot(source_uri=resolve(config.inference.input_dir), snapshots_root=config.snapshots_root,
                        span_selection="all" if config.data.spans else None,
                        span_ready_marker=config.data.span_ready_marker if config.data.spans else None,
                        missing_values=config.data.missing_values,
                        # A ragged row is the BulkInferrer's to reject by line, not a reason to fail the run.
                        check_csv=False).with_id(INFERENCE_SNAPSHOT_ID)
    inferrer = BulkInferrer(snapshot=snapshot.outputs[SNAPSHOT_KEY], schema=schema, pushed_model=pushed_model,
                            serving_model=serving_model, features=config.features, keep=config.predict.keep,
                            format=config.predict.format, chunk_rows=config.predict.chunk_rows,
                            missing_values=config.data.missing_values,
                            ledger_dir=ledger_dir(config)).with_id(BULK_INFERRER_ID)
    return [snapshot, inferrer]
