"""Whole pushes (components/serving/serving_dir.py) and the run lock (pipeline/local/lock.py), without a pipeline
run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from components.serving import serving_dir
from pipeline.errors import RunLocked
from pipeline.local.lock import LOCK_FILE, run_lock


def _model(tmp_path: Path, tag: str = "a") -> Path:
    model = tmp_path / f"model-{tag}"
    (model / "variables").mkdir(parents=True)
    (model / "variables" / "variables.index").write_text(f"index {tag}")
    (model / "variables" / "variables.data-00000-of-00001").write_bytes(os.urandom(1000))
    (model / "assets").mkdir()
    (model / "assets" / "vocab.txt").write_text("Adelie\nGentoo\n")
    (model / serving_dir.SAVED_MODEL).write_text(f"graph {tag}")
    return model


def test_publish_makes_a_loadable_version_with_identical_files(tmp_path):
    model, base = _model(tmp_path), tmp_path / "serving"
    path = serving_dir.publish(str(model), str(base), 1000)
    assert path == f"{base}/1000"
    assert [v.number for v in serving_dir.versions(str(base))] == [1000]
    assert serving_dir.tree_digest(path) == serving_dir.tree_digest(str(model))
    assert sorted(os.listdir(base)) == ["1000"]  # no staging left behind
    with pytest.raises(FileExistsError):
        serving_dir.publish(str(model), str(base), 1000)


def test_next_version_is_above_every_existing_one(tmp_path):
    base = tmp_path / "serving"
    (base / "5000").mkdir(parents=True)
    assert serving_dir.next_version(str(base), now=4000) == 5001
    assert serving_dir.next_version(str(base), now=6000) == 6000


def test_tree_digest_tells_models_apart(tmp_path):
    a, b = _model(tmp_path, "a"), _model(tmp_path, "b")
    assert serving_dir.tree_digest(str(a)) != serving_dir.tree_digest(str(b))


_KILLED_PUSH = textwrap.dedent("""
    import sys, time
    from tfx.dsl.io import fileio
    from components.serving import serving_dir

    def slow_copy(src, dst):
        fileio.copy(src, dst, overwrite=True)
        print("copied", dst, flush=True)
        time.sleep(30)

    serving_dir.publish(sys.argv[1], sys.argv[2], 1234, copy_file=slow_copy)
""")


def test_a_push_killed_midway_leaves_no_version_tf_serving_would_load(tmp_path):
    model, base = _model(tmp_path), tmp_path / "serving"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_PUSH, str(model), str(base)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout.readline().startswith("copied"), "the push never started copying"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    leftovers = os.listdir(base)
    assert leftovers and all(name.startswith(serving_dir.STAGING_PREFIX) for name in leftovers), leftovers
    # TF Serving takes only integer-named children of the base path as versions.
    assert not [name for name in leftovers if name.isdigit()]
    assert serving_dir.versions(str(base)) == []
    # The next push clears what the killed one left and publishes whole.
    # (The next run took the root's lock after the kill: the staging is older than that.)
    removed = serving_dir.clear_debris(str(base), "next-run", live_since=time.time())
    assert removed == [f"staging {leftovers[0]}"]
    serving_dir.publish(str(model), str(base), 1235)
    assert sorted(os.listdir(base)) == ["1235"]


def test_run_lock_serialises_two_holders(tmp_path):
    order: list[str] = []
    entered = threading.Event()

    def first():
        with run_lock(str(tmp_path), wait_seconds=10, poll_seconds=0.05):
            order.append("first in")
            entered.set()
            time.sleep(0.5)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    entered.wait(5)
    with run_lock(str(tmp_path), wait_seconds=10, poll_seconds=0.05):
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"]
    assert not (tmp_path / LOCK_FILE).exists()


def test_run_lock_refuses_after_the_wait_naming_the_holder(tmp_path):
    with run_lock(str(tmp_path), wait_seconds=0):
        with pytest.raises(RunLocked, match=rf"pid {os.getpid()} on {socket.gethostname()}.*lock_wait_seconds"):
            with run_lock(str(tmp_path), wait_seconds=0.2, poll_seconds=0.05):
                pass


def test_a_dead_holders_lock_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_FILE).write_text(json.dumps(
        {"pid": dead.pid, "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z"}))
    said = []
    with run_lock(str(tmp_path), wait_seconds=0, say=said.append):
        holder = json.loads((tmp_path / LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid()
    assert any("stale" in m for m in said)


def test_another_hosts_lock_is_not_stale(tmp_path):
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": "x"}))
    with pytest.raises(RunLocked, match="elsewhere"):
        with run_lock(str(tmp_path), wait_seconds=0):
            pass
