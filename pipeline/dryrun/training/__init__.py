"""A stand-in for Vertex AI Training behind the unmodified TFX client: the JobService (customjob.py), its
throw-away keys (trust.py) and the replicas as local processes (workers.py)."""
