"""Pieces of the DAG that create_pipeline (pipeline/dag/pipeline.py) wires in: the Evaluator's config for the
dataset's task (evaluation.py), and the no-new-span condition around everything after the Snapshot (conditions.py)."""
