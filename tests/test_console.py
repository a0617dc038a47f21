"""pipeline/console.py in a process of its own, as `python -m pipeline` starts it: what is written to descriptor 2
(TensorFlow's C++ does so) goes to the log, the command's own stderr and an uncaught error's traceback reach the
terminal, and the log moves into a run's log file. No TensorFlow here: `os.write(2, ...)` is what its C++ does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_COMMAND = """
import logging, os, sys
from pipeline import console
console.quiet()
os.write(2, b"E external/local_xla: Unable to register cuDNN factory\\n")  # as TensorFlow's C++ writes at import
logging.getLogger("tensorflow").warning("tf_record_iterator is deprecated")  # a library's record
logging.getLogger("pipeline.serving").warning("our own warning")
print("error: our own message", file=sys.stderr)
if sys.argv[1] == "run":
    console.log_into(sys.argv[2])
    os.write(2, b"W local_rendezvous.cc: Local rendezvous is aborting\\n")
    logging.getLogger("absl").error("MetadataStore with DB connection initialized")
if sys.argv[1] == "crash":
    raise RuntimeError("boom")
sys.exit(3)  # as argparse's --help and usage errors end a command
"""


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", _COMMAND, *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=60)


def test_a_command_prints_its_own_words_and_leaves_no_log(tmp_path):
    done = _run(tmp_path, "other")
    assert done.returncode == 3
    assert done.stderr == "WARNING: our own warning\nerror: our own message\n"
    assert not list(tmp_path.glob("pipeline-*.log")), "a command that ended cleanly keeps no temporary log"


def test_a_run_moves_everything_into_its_log_file(tmp_path):
    log = tmp_path / "run.log"
    done = _run(tmp_path, "run", str(log))
    assert done.returncode == 3 and done.stderr == "WARNING: our own warning\nerror: our own message\n"
    text = log.read_text()
    # From the import on: what came before the run's log was known, then what came after.
    assert text.index("Unable to register cuDNN factory") < text.index("tf_record_iterator is deprecated") \
        < text.index("Local rendezvous is aborting") < text.index("MetadataStore with DB connection initialized")
    assert not list(tmp_path.glob("pipeline-*.log"))


def test_an_uncaught_error_reaches_the_terminal_naming_the_log(tmp_path):
    done = _run(tmp_path, "crash")
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr and "Traceback" in done.stderr
    [log] = tmp_path.glob("pipeline-*.log")
    assert re.search(rf"the libraries' own messages \(TensorFlow, TFX, Beam\): {re.escape(str(log))}\n$", done.stderr)
    assert "Unable to register cuDNN factory" in log.read_text() and "cuDNN" not in done.stderr
