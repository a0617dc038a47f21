"""The DAG (pipeline.py: create_pipeline) and its pieces: the Evaluator's config, the no-new-span condition, the run
lease, the splits, the Trainer as a Vertex CustomJob and the Beam args."""
