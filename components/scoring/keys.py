"""The inference steps' node ids and the Predictions artifact's type and properties: light to import, for the
run summary, the report and lineage."""

BULK_INFERRER_ID, INFERENCE_SNAPSHOT_ID = "BulkInferrer", "InferenceSnapshot"
PREDICTIONS_TYPE = "components.Predictions"
# Custom properties of a Predictions artifact.
MODEL_VERSION, MODEL_PATH, SNAPSHOT_DIGEST = "model_version", "model_path", "snapshot_digest"
SCORED_SPANS, SKIPPED_SPANS = "spans", "skipped_spans"
FLAT = "flat"  # the one unit of a source without spans
ROWS, SCORED, REJECTED = "rows", "scored", "rejected"


def describe(properties: dict) -> str:
    """One line on what a BulkInferrer execution scored, from its Predictions artifact's properties."""
    version = properties.get(MODEL_VERSION) or ""
    skipped = properties.get(SKIPPED_SPANS) or ""
    if not version:
        return "nothing scored: no model pushed or serving"
    if not properties.get(SCORED_SPANS):
        return f"nothing new to score (scored before: {skipped})"
    spans = properties.get(SCORED_SPANS)
    return (f"scored {properties.get(SCORED, 0):,} of {properties.get(ROWS, 0):,} rows "
            f"({properties.get(REJECTED, 0):,} rejected) of snapshot {str(properties.get(SNAPSHOT_DIGEST))[:12]}"
            + ("" if spans == FLAT else f" (spans {spans})") + f" with model version {version}"
            + (f"; scored before: {skipped}" if skipped else ""))
