"""The dataset a config describes: checks of the features section against the
data's columns before anything runs (checks.py), and `schema infer` (schema_infer.py)."""
