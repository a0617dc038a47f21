"""Pieces of the DAG that create_pipeline (pipeline/pipeline.py) wires in and that
depend on the dataset: the Evaluator's config for the task (evaluation.py)."""
