"""Run the pipeline on this machine with LocalDagRunner and MLMD on SQLite."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Optional, TextIO

from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.orchestration.pipeline import Pipeline

from pipeline import console
from pipeline.config import Config, join
from pipeline.dag.pipeline import create_pipeline
from pipeline.data.checks import check_features
from pipeline.errors import ConfigError, PipelineFailed
from pipeline.local import notification
from pipeline.local.lock import run_lock
from pipeline.local.progress import run_logging
from pipeline.runs.history_page import write_history_page
from pipeline.runs.report import write_report
from pipeline.runs.summary import RunSummary, format_summary, summarize


def run_local(config: Config, stream: Optional[TextIO] = None) -> RunSummary:
    # Looked up per call, not bound at import: redirected stdout (tests, wrappers) must be honoured.
    stream = stream or sys.stdout
    _check_local(config)
    # Before anything is written: a features section that can't fit the data stops here.
    resolved = check_features(config)
    if resolved is not None:
        stream.write("features (from the config; 'inferred' from the schema's types, until Transform reads the data "
                     "and prints each column's role):\n  "
                     + resolved.describe().replace("\n", "\n  ") + "\n")
    os.makedirs(os.path.dirname(config.pipeline.metadata_path), exist_ok=True)
    log_dir = join(config.pipeline.root_uri, "logs")
    os.makedirs(log_dir, exist_ok=True)
    log_file = join(log_dir, time.strftime("run-%Y%m%d-%H%M%S.log"))
    # What TensorFlow's C++ and the libraries print goes to the log from here on (pipeline/console.py).
    console.log_into(log_file)

    # One run at a time per root: a second run decides against the first's model, not the same old one.
    with run_lock(config.pipeline.root_uri, config.pipeline.lock_wait_seconds,
                  say=lambda m: stream.write(m + "\n")):
        # No new span since the serving model: the run's Snapshot says so and the DAG skips the rest
        # (pipeline/dag/conditions.py); the summary reports it (RunSummary.nothing_new).
        pipeline = create_pipeline(config, metadata_path=config.pipeline.metadata_path)
        return _run(config, pipeline, log_file, stream)


def _check_local(config: Config) -> None:
    """`run` runs the DAG on this machine; a Vertex config's paths are in the bucket Vertex runs in."""
    if config.vertex is not None:
        raise ConfigError(f"this is a Vertex AI config (it has a vertex section; pipeline.root is "
                          f"{config.pipeline.root_uri}): Vertex runs it, `run` does not. With the same --config, "
                          "`python -m pipeline dryrun` (make dryrun) runs its compiled spec on this machine as Vertex "
                          "would, and `python -m pipeline submit` (make submit) runs it on Vertex AI; `run` takes a "
                          "local config such as configs/local.yaml")
    if config.pipeline.root_uri.startswith("gs://"):
        raise ConfigError(f"pipeline.root is {config.pipeline.root_uri}: a local run needs a local directory, "
                          "not a gs:// URI")


def _run(config: Config, pipeline: Pipeline, log_file: str, stream: TextIO) -> RunSummary:
    # The summary, the report and the notification read MLMD and render plots: their libraries' records go to
    # the log too, so the console ends with the summary.
    with run_logging(log_file, stream) as progress:
        try:
            LocalDagRunner().run(pipeline)
        except Exception as e:
            where = progress.current or "the pipeline"
            # What did run, and the data gate's anomalies if it stopped the run.
            try:
                summary = summarize(config.pipeline.metadata_path, config.pipeline.name)
            except LookupError:  # it failed before recording any run
                summary = None
            else:
                stream.write(format_summary(summary, config, log_file) + "\n")
            report = _report(config, summary)
            notification.send(config, notification.outcome(config, summary, where, f"{type(e).__name__}: {e}",
                                                            report), stream)
            logging.getLogger(__name__).error("%s failed", where, exc_info=e)  # the traceback, in the log
            raise PipelineFailed(f"{where} failed: {type(e).__name__}: {e}\nfull log: {log_file}"
                                 f"\nreport: {report}") from e
        summary = summarize(config.pipeline.metadata_path, config.pipeline.name)
        stream.write(format_summary(summary, config, log_file) + "\n")
        report = _report(config, summary)
        stream.write(f"report:    {report}\n")
        notification.send(config, notification.outcome(config, summary, report=report), stream)
    return summary


def _report(config: Config, summary: RunSummary | None) -> str:
    """Write the run's report.html; a broken report must not hide the run's own outcome."""
    try:
        path = write_report(config, summary=summary)
        write_history_page(config)
        return path
    except Exception as e:  # noqa: BLE001 - reported, and the run's result stands
        logging.getLogger(__name__).exception("writing the run report failed")
        return f"not written ({type(e).__name__}: {e})"
