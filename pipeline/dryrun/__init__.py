"""`python -m pipeline dryrun`: the compiled PipelineJob executed on this machine, as the backend runs it.

Along the backend's own seams (kubeflow/pipelines backend/src/v2):
spec.py is the model of the submitted job (DAGs, tasks, components,
executors, field paths); rules.py checks every rule the backend applies to
a spec, all before any task runs; backend.py says what is particular to one
backend (Vertex first); driver.py resolves a task's inputs, evaluates its
condition (condition.py) and runs the pre-cache hook; launcher.py builds the
command line, runs it and reads its outputs; tasks.py joins the two for one
task and run.py walks the DAGs. Around them: bucket.py maps gs:// to a local
directory, cache.py applies the backend's cache rule, customjob.py (with
trust.py's throw-away keys) and workers.py stand in for Vertex AI Training
behind the unmodified TFX client, record.py writes the runs to a local ML
Metadata store for the summary and report. See docs/vertex.md.
"""

# Where dry runs keep the mapped bucket and the service's state, relative to the repo root.
DEFAULT_DIR = "output/dryrun"
