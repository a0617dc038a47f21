"""The terminal shows what a command says and nothing the libraries print. Why and how: docs/internals.md (a quiet
console).

TensorFlow's C++ writes to file descriptor 2 itself (the cuFFT/cuDNN/cuBLAS registration errors at import, whatever
TF_CPP_MIN_LOG_LEVEL says; `Local rendezvous is aborting` at the end of every tf.data pass), and TFX, Beam and TFMA
log INFO and deprecation records through Python's logging. `quiet()` (called by pipeline/__main__.py before anything
imports TensorFlow) points descriptor 2 at a log file and hands Python's `sys.stderr`, which the command's own error
messages and an uncaught error's traceback are written to, a copy of the terminal's descriptor. A run then moves the
log into its own log file (`log_into`); any other command's log is a temporary file, removed when the command ends
(also by sys.exit or argparse's exit) and named on the terminal when an uncaught error escapes, and then kept.
"""

from __future__ import annotations

import atexit
import faulthandler
import logging
import os
import shutil
import sys
import tempfile
import traceback
from typing import Optional, TextIO

# Loggers whose warnings are the command's own words to the person: they reach the terminal outside a run (inside
# one, pipeline/local/progress.py decides what is printed).
OWN_LOGGERS = ("pipeline", "components", "trainer")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Own(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.split(".", 1)[0] in OWN_LOGGERS


class Console:
    """File descriptor 2 into a log file; `terminal` is where the person reads what went wrong."""

    def __init__(self, terminal: TextIO, log_path: str, temporary: bool):
        self.terminal, self.log_path, self.temporary = terminal, log_path, temporary
        self.keep = False  # an uncaught error named the temporary log: it stays

    def log_into(self, path: str) -> None:
        """From now on descriptor 2 (and so the libraries' log records) goes to `path`, after what was written so
        far (the imports' lines), which moves there from the temporary log."""
        sys.stderr.flush()
        sys.__stderr__.flush()
        with open(path, "ab") as target:
            if self.temporary and os.path.exists(self.log_path):
                with open(self.log_path, "rb") as source:
                    shutil.copyfileobj(source, target)
            os.dup2(target.fileno(), 2)
        if self.temporary:
            _remove(self.log_path)
        self.log_path, self.temporary = path, False

    def finish(self) -> None:
        """At exit (a return, sys.exit, argparse's exit): a temporary log has nothing anyone needs, unless an
        uncaught error named it."""
        if self.temporary and not self.keep:
            sys.__stderr__.flush()
            _remove(self.log_path)

    def _excepthook(self, kind, value, tb) -> None:
        self.keep = True
        traceback.print_exception(kind, value, tb, file=self.terminal)
        self.terminal.write(f"the libraries' own messages (TensorFlow, TFX, Beam): {self.log_path}\n")
        self.terminal.flush()


_active: Optional[Console] = None


def quiet() -> Console:
    """Descriptor 2 into a temporary log, `sys.stderr` onto the terminal, Python's log records into the log (the
    warnings of this project's own loggers onto the terminal too). Once per process, before TensorFlow loads."""
    global _active
    if _active is not None:
        return _active
    sys.stderr.flush()
    terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace")
    fd, path = tempfile.mkstemp(prefix="pipeline-", suffix=".log")
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = terminal
    # A crash in C++ (a CHECK failure, a segfault) still shows where Python was, on the terminal.
    faulthandler.enable(file=terminal)
    _active = Console(terminal, path, temporary=True)
    sys.excepthook = _active._excepthook
    atexit.register(_active.finish)  # every way out but a crash (the log then stays, for its C++ lines)
    root = logging.getLogger()
    # sys.__stderr__ writes to descriptor 2, wherever log_into points it later.
    to_log = logging.StreamHandler(sys.__stderr__)
    to_log.setFormatter(logging.Formatter(LOG_FORMAT))
    to_terminal = logging.StreamHandler(terminal)
    to_terminal.setLevel(logging.WARNING)
    to_terminal.addFilter(_Own())
    to_terminal.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    # Handlers on the root before any library's basicConfig (Beam's PipelineOptions calls it), which then does
    # nothing, and before TensorFlow's logger, which adds its own stderr handler only to a bare root.
    root.handlers = [to_log, to_terminal]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)  # Python warnings (deprecations) are log records: into the log
    return _active


def log_into(path: str) -> None:
    """A run's log file takes descriptor 2 from here on; nothing when `quiet()` was not called (tests, imports)."""
    if _active is not None:
        _active.log_into(path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
