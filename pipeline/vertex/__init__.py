"""Vertex AI: the config sections (config.py), the Vertex-specific DAG pieces
(dag.py), compiling (compile.py), submitting (submit.py) and scheduling
(schedules.py). Nothing is imported here: the Google Cloud client libraries are
slow to import and local runs do not need them."""
