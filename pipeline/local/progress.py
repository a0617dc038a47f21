"""Live progress for local runs: which component runs, how long each took. Why: docs/internals.md."""

from __future__ import annotations

import logging
import sys
import time
import warnings
from typing import Optional, TextIO

import absl.logging

from pipeline.console import LOG_FORMAT

# The records TFX's launcher logs as a component starts, finishes, or is a cache hit.
RUNNING_RECORD = "Component %s is running."
FINISHED_RECORD = "Component %s is finished."
CACHED_RECORD = "A cached execution %d is used."
# Printed under the component: the column roles (before the Trainer starts) and the Trainer's own lines.
_TRAINER_LOGGERS = ("components.data.column_roles", "trainer.loop", "trainer.run_fn", "trainer.strategy")


class ComponentProgress(logging.Handler):
    def __init__(self, stream: TextIO = sys.stdout):
        super().__init__(logging.INFO)
        self.stream = stream
        self.started = time.monotonic()
        self.current: Optional[str] = None
        self.component_started = 0.0
        self.cached = False

    def _print(self, text: str) -> None:
        self.stream.write(f"[{time.monotonic() - self.started:6.1f}s] {text}\n")
        self.stream.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.msg == RUNNING_RECORD:
                self.current, self.cached = record.args[0], False
                self.component_started = time.monotonic()
                self._print(f"> {self.current} ...")
            elif record.msg == CACHED_RECORD:
                self.cached = True
            elif record.msg == FINISHED_RECORD:
                seconds = time.monotonic() - self.component_started
                self._print(f"  {record.args[0]} done in {seconds:.1f}s" + (" (from cache)" if self.cached else ""))
                self.current = None
            elif record.name in _TRAINER_LOGGERS and record.levelno >= logging.INFO:
                self._print("    " + record.getMessage().replace("\n", "\n" + " " * 14))
        except Exception:  # progress must never break the run
            self.handleError(record)


class run_logging:
    """Context manager: progress on the console, the full TFX/TF log in `log_file`."""

    def __init__(self, log_file: str, stream: TextIO = sys.stdout):
        self.log_file = log_file
        self.progress = ComponentProgress(stream)

    def __enter__(self) -> ComponentProgress:
        root = logging.getLogger()
        self._saved = (root.handlers[:], root.level)
        self._file = logging.FileHandler(self.log_file)
        self._file.setFormatter(logging.Formatter(LOG_FORMAT))
        root.handlers = [self._file, self.progress]
        # TF's logger prints to stderr on its own; route it through ours.
        tf_logger = logging.getLogger("tensorflow")
        self._saved_tf = (tf_logger.handlers[:], tf_logger.propagate)
        tf_logger.handlers, tf_logger.propagate = [], True
        root.setLevel(logging.INFO)
        self._saved_absl = absl.logging.get_verbosity()
        absl.logging.set_verbosity(absl.logging.INFO)
        # Already captured (pipeline/console.py): it stays so after the run.
        self._saved_warnings = getattr(warnings.showwarning, "__module__", "") == "logging"
        logging.captureWarnings(True)
        return self.progress

    def __exit__(self, *exc) -> None:
        root = logging.getLogger()
        root.handlers, level = self._saved
        root.setLevel(level)
        tf_logger = logging.getLogger("tensorflow")
        tf_logger.handlers, tf_logger.propagate = self._saved_tf
        # Left at INFO, absl's records (one per MLMD store opened) would reach whatever handles them afterwards.
        absl.logging.set_verbosity(self._saved_absl)
        logging.captureWarnings(self._saved_warnings)
        self._file.close()
