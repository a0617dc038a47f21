"""Batch scoring: raw CSV rows through a SavedModel's serving_default in Beam, the rows' kept columns beside
the outputs (`python -m pipeline predict` and the pipeline's BulkInferrer step; docs/predict.md)."""
