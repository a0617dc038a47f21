"""`python -m pipeline dryrun`: the compiled spec run here as its backend runs it: run.py walks the DAGs,
driver.py and launcher.py do a task's two halves (tasks.py); why and sources: docs/internals.md."""

# Where dry runs keep the mapped bucket and the service's state, relative to the repo root.
DEFAULT_DIR = "output/dryrun"
