"""`python -m pipeline dryrun`: the compiled Vertex AI PipelineJob executed on this machine, as Vertex runs it.

run.py drives the runs and tasks.py one task; spec.py reads the submitted job
(tasks, executors, DAG order) and refuses what it cannot execute;
invocation.py builds each task's ExecutorInput and command line with
kfp.local; bucket.py maps gs:// to a local directory; artifacts.py answers
resolver queries from earlier runs' artifacts; cache.py applies Vertex's cache
rule; customjob.py (with trust.py's throw-away keys) and workers.py stand in
for Vertex AI Training behind the unmodified TFX client; record.py writes the
runs to a local ML Metadata store for the summary and report. See
docs/vertex.md.
"""

# Where dry runs keep the mapped bucket and the service's state, relative to the repo root.
DEFAULT_DIR = "output/dryrun"
