"""The dry run's fork server (pipeline/dryrun/forkserver/) with small task modules, and once with the
real preload of a TFX task: a forked task is set up as `python -m` would set it up, its exit status is the
interpreter's, it can be killed, and anything that might differ from a fresh process gets a fresh one. A process
keeps its server for its next dry runs, as long as it fits them."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.config import REPO_ROOT
from pipeline.dryrun import forkserver
from pipeline.dryrun.gcs_emulator import EMULATOR_ENV
from pipeline.dryrun.training import trust

_TASK = """
import json, os, sys, time
what = sys.argv[1]
if what == "show":
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "spec": os.environ.get("CLUSTER_SPEC"),
                      "emulator": os.environ.get("STORAGE_EMULATOR_HOST"),
                      "tf_log": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
                      "name": __name__, "pid": os.getpid(), "stdin": sys.stdin.read()}))
elif what == "exit3":
    print("leaving with 3")
    sys.exit(3)
elif what == "raise":
    raise ValueError("boom from the task")
elif what == "sleep":
    print("sleeping", flush=True)
    time.sleep(120)
"""

_STARTS_A_THREAD = ("import threading\n"
                    "threading.Thread(target=threading.Event().wait, name='lingering', daemon=True).start()\n")


@pytest.fixture(autouse=True)
def no_server_left():
    """The server a test's dry run leaves is closed after it (a process keeps its server until exit)."""
    yield
    forkserver.close_kept()


@pytest.fixture
def tasks(tmp_path):
    (tmp_path / "probe_task.py").write_text(_TASK)
    (tmp_path / "starts_a_thread.py").write_text(_STARTS_A_THREAD)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}",
           "CLUSTER_SPEC": "first"}
    return tmp_path, env


def _dry_run(tmp_path, modules, console=None):
    """What serving() makes of a dry run whose spec's tasks import `modules`."""
    return forkserver.Run(modules, tmp_path / "forkserver.log", console or io.StringIO())


def _run(dry_run, tmp_path, env, *args, log="task.log"):
    with open(tmp_path / log, "a") as out:
        child = dry_run.spawn([sys.executable, "-m", "probe_task", *args], env, tmp_path, out)
    return child


def test_a_forked_task_has_its_own_env_argv_cwd_and_log_and_the_interpreters_exit_status(tasks):
    tmp_path, env = tasks
    run = _dry_run(tmp_path, ["json", "probe_task:json"])
    try:
        # CLUSTER_SPEC is read when used (RUN_TIME_ENV): a replica's own value does not need a fresh process.
        shown = _run(run, tmp_path, {**env, "CLUSTER_SPEC": "second"}, "show", "--flag", log="show.log")
        exit3 = _run(run, tmp_path, env, "exit3", log="exit3.log")
        raised = _run(run, tmp_path, env, "raise", log="raise.log")
        codes = [c.wait(timeout=60) for c in (shown, exit3, raised)]
    finally:
        run.end()
        forkserver.close_kept()
    server = run.server
    assert all(isinstance(c, forkserver.ForkedProcess) for c in (shown, exit3, raised))
    assert codes == [0, 3, 1]
    seen = json.loads((tmp_path / "show.log").read_text())
    assert seen["argv"] == [str(tmp_path / "probe_task.py"), "show", "--flag"]
    assert seen["cwd"] == str(tmp_path) and seen["spec"] == "second" and seen["name"] == "__main__"
    assert seen["pid"] == shown.pid != server.process.pid and seen["stdin"] == ""
    assert (tmp_path / "exit3.log").read_text() == "leaving with 3\n"
    traceback = (tmp_path / "raise.log").read_text()
    assert traceback.startswith("Traceback (most recent call last):") and "ValueError: boom from the task" in traceback
    assert server.process.returncode == 0


def test_a_running_task_is_killed_and_reaped(tasks):
    tmp_path, env = tasks
    run = _dry_run(tmp_path, ["time"])
    try:
        child = _run(run, tmp_path, env, "sleep")
        deadline = time.monotonic() + 60
        while "sleeping" not in (tmp_path / "task.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None
        child.kill()
        assert child.wait(timeout=30) == -9 and child.poll() == -9
        with pytest.raises(ProcessLookupError):
            os.kill(child.pid, 0)  # reaped by the server: no zombie left
    finally:
        run.end()


def test_an_environment_difference_read_at_import_gets_a_fresh_process(tasks):
    tmp_path, env = tasks
    console = io.StringIO()
    with forkserver.active(_dry_run(tmp_path, ["json"], console)):
        with open(tmp_path / "first.log", "a") as out:
            first = forkserver.start([sys.executable, "-m", "probe_task", "show"], env, tmp_path, out)
        with open(tmp_path / "other.log", "a") as out:
            other = forkserver.start([sys.executable, "-m", "probe_task", "show"], {**env, "TF_CPP_MIN_LOG_LEVEL": "3"},
                                     tmp_path, out)
        assert first.wait(timeout=60) == 0 and other.wait(timeout=60) == 0
    assert isinstance(first, forkserver.ForkedProcess) and isinstance(other, subprocess.Popen)
    assert "other: a fresh process: its environment differs from the fork server's in TF_CPP_MIN_LOG_LEVEL" \
        in console.getvalue()
    # A run-time variable whose import-time reader the server has loaded is no exception.
    request = {"argv": [sys.executable, "-m", "m"], "cwd": str(tmp_path), "env": {**env, "AIP_MODEL_DIR": "/x"}}
    assert forkserver.why_fresh(request, env, str(tmp_path), set()) is None
    assert "AIP_MODEL_DIR (read at import by google.cloud.aiplatform.training_utils" in forkserver.why_fresh(
        request, env, str(tmp_path), {"google.cloud.aiplatform.training_utils.environment_variables"})
    assert "cwd" in forkserver.why_fresh({**request, "cwd": "/"}, env, str(tmp_path), set())


def test_the_server_refuses_to_fork_when_the_preload_leaves_a_thread_running(tasks):
    tmp_path, env = tasks
    console = io.StringIO()
    run = _dry_run(tmp_path, ["starts_a_thread"], console)
    try:
        assert _run(run, tmp_path, env, "show") is None
    finally:
        run.end()
    assert "FRESH PROCESSES: the fork server refused to fork: Python threads are running after the preload: " \
           "lingering" in console.getvalue()
    assert "REFUSED" in (tmp_path / "forkserver.log").read_text()


_CHECK = """
import json, os, sys, threading
from tensorflow.python.eager import context
before = context.context_safe() is not None and context.context_safe()._initialized
import tensorflow as tf
f = tf.function(lambda x: x * 2 + 1, jit_compile=True)
print(json.dumps({"initialized_at_start": before, "threads": threading.active_count(),
                  "value": float(f(tf.constant(2.0))), "modules": len(sys.modules)}))
"""


def test_the_real_preload_of_a_tfx_task_passes_the_checks_and_xla_flags_apply_in_the_child(tmp_path):
    (tmp_path / "check_task.py").write_text(_CHECK)
    spec = {"deploymentSpec": {"executors": {"e": {"container": {
        "command": ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"],
        "args": ["--executor_class_path", "tfx.components.statistics_gen.executor.Executor"]}}}}}
    template = tmp_path / "pipeline.json"
    template.write_text(json.dumps({"pipelineSpec": spec}))
    modules = forkserver.preload_modules(template)
    assert "tfx.components.statistics_gen.executor" in modules and "absl:app" in modules
    dump = tmp_path / "xla"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}", "XLA_FLAGS": f"--xla_dump_to={dump}"}
    console = io.StringIO()
    run = _dry_run(tmp_path, modules, console)
    try:
        with open(tmp_path / "check.log", "a") as out:
            child = run.spawn([sys.executable, "-m", "check_task"], env, tmp_path, out)
        assert isinstance(child, forkserver.ForkedProcess), console.getvalue()
        assert child.wait(timeout=300) == 0, (tmp_path / "check.log").read_text()[-3000:]
    finally:
        run.end()
    seen = json.loads((tmp_path / "check.log").read_text().strip().splitlines()[-1])
    assert seen["initialized_at_start"] is False and seen["value"] == 5.0
    assert seen["modules"] > 3000  # TF, Beam and TFX came with the fork
    # XLA reads XLA_FLAGS when it first compiles, in the child: the dump is there.
    assert any(dump.iterdir())


_PARENT = """
import sys, time
from pathlib import Path
from pipeline.dryrun import forkserver
tmp = Path(sys.argv[1])
run = forkserver.Run(["json"], tmp / "forkserver.log", sys.stderr)
env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": sys.argv[2]}
with open(tmp / "task.log", "a") as out:
    child = run.spawn([sys.executable, "-m", "probe_task", "sleep"], env, tmp, out)
print(run.server.process.pid, child.pid, flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_server_and_its_tasks_end_when_the_dry_run_is_killed(tasks):
    tmp_path, env = tasks
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path), env["PYTHONPATH"]],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    server_pid, task_pid = map(int, parent.stdout.readline().split())
    assert _running(server_pid) and _running(task_pid)
    parent.kill()  # no clean-up code of the dry run runs
    parent.wait()
    deadline = time.monotonic() + 30
    while (_running(server_pid) or Path(f"/proc/{task_pid}").exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(server_pid)
    assert not Path(f"/proc/{task_pid}").exists()  # stopped and reaped by the server, not left a zombie


_DIALS = """
import grpc, sys
try:
    grpc.channel_ready_future(grpc.insecure_channel("example.invalid:443")).result(timeout=3)
except grpc.FutureTimeoutError:
    pass
"""


def test_grpc_reads_grpc_proxy_in_the_forked_task_not_at_import(tasks):
    """Why grpc_proxy (each run's emulator has its own port) is in RUN_TIME_ENV."""
    import socket

    tmp_path, env = tasks
    (tmp_path / "dials.py").write_text(_DIALS)
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen()
        proxy.settimeout(30)
        run = _dry_run(tmp_path, ["grpc"])
        try:
            with open(tmp_path / "first.log", "a") as out:  # the server starts with another proxy
                first = run.spawn([sys.executable, "-m", "probe_task", "show"],
                                     {**env, "grpc_proxy": "http://127.0.0.1:9"}, tmp_path, out)
            with open(tmp_path / "dials.log", "a") as out:
                dials = run.spawn([sys.executable, "-m", "dials"],
                                     {**env, "grpc_proxy": f"http://127.0.0.1:{proxy.getsockname()[1]}"}, tmp_path,
                                     out)
            assert isinstance(dials, forkserver.ForkedProcess)
            connection, _ = proxy.accept()
            with connection:
                assert connection.recv(200).startswith(b"CONNECT example.invalid:443")
            assert first.wait(timeout=30) == 0 and dials.wait(timeout=30) == 0
        finally:
            run.end()


def test_a_later_dry_run_reuses_the_server_unless_its_environment_differs_in_what_is_read_at_import(
        tasks, monkeypatch):
    tmp_path, env = tasks
    monkeypatch.syspath_prepend(str(tmp_path))  # preload_modules finds the task module as the spec names it
    template = tmp_path / "pipeline.json"
    template.write_text(json.dumps({"pipelineSpec": {"deploymentSpec": {"executors": {"e": {"container": {
        "command": ["python", "-m", "probe_task"], "args": ["show"]}}}}}}))
    # Each dry run has its own fake-gcs-server, each test its pytest name (read when used); TF_CPP_MIN_LOG_LEVEL is
    # not in RUN_TIME_ENV.
    envs = [env, {**env, EMULATOR_ENV: "http://127.0.0.1:2", "PYTEST_CURRENT_TEST": "t.py::other (setup)"},
            {**env, "TF_CPP_MIN_LOG_LEVEL": "3"}]
    servers, seen, consoles = [], [], []
    for n, run_env in enumerate(envs):
        console = io.StringIO()
        with forkserver.serving(template, tmp_path / f"run{n}" / "forkserver.log", console) as run:
            with open(tmp_path / f"run{n}.log", "a") as out:
                child = forkserver.start([sys.executable, "-m", "probe_task", "show"], run_env, tmp_path, out)
            assert isinstance(child, forkserver.ForkedProcess), console.getvalue()
            assert child.wait(timeout=60) == 0
        servers.append(run.server.process)
        seen.append(json.loads((tmp_path / f"run{n}.log").read_text()))
        consoles.append(console.getvalue())
    first, second, third = servers
    assert second is first and third is not first
    assert first.returncode == 0 and third.poll() is None  # the one replaced was closed, the new one is kept
    assert [s["emulator"] for s in seen] == [None, "http://127.0.0.1:2", None]
    assert seen[2]["tf_log"] == "3" and len({s["pid"] for s in seen} | {first.pid, third.pid}) == 5
    assert f"fork server {first.pid} (kept from an earlier dry run" in consoles[1]
    assert "a new fork server: the one an earlier dry run of this process left cannot fork its tasks: its " \
           "environment differs from the fork server's in TF_CPP_MIN_LOG_LEVEL" in consoles[2]
    # Each dry run's forkserver.log has what the server said while it served that run.
    logs = [(tmp_path / f"run{n}" / "forkserver.log").read_text() for n in range(3)]
    assert "imports preloaded" in logs[0] and "imports preloaded" not in logs[1] and "imports preloaded" in logs[2]
    assert "a new fork server: the one an earlier dry run of this process left cannot fork its tasks" in logs[2]
    assert f"kept from an earlier dry run of this process (its start: {tmp_path / 'run0' / 'forkserver.log'})" \
        in logs[1]
    for n, log in enumerate(logs):
        assert [f"pid {s['pid']}:" in log for s in seen] == [m == n for m in range(3)], log


def test_what_a_dry_run_leaves_running_is_stopped_at_its_end_and_the_server_is_kept(tasks):
    tmp_path, env = tasks
    with forkserver.active(_dry_run(tmp_path, ["time"])) as run:
        child = _run(run, tmp_path, env, "sleep")
        deadline = time.monotonic() + 60
        while "sleeping" not in (tmp_path / "task.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert child.poll() == -signal.SIGTERM
    assert not Path(f"/proc/{child.pid}").exists()  # reaped
    assert run.server.process.poll() is None


_TLS_DIAL = """
import grpc, sys
channel = grpc.secure_channel(sys.argv[1], grpc.ssl_channel_credentials(),
                              options=[("grpc.ssl_target_name_override", sys.argv[2])])
grpc.channel_ready_future(channel).result(timeout=5)
"""


def test_grpc_reads_its_default_roots_file_in_the_forked_task_not_at_import(tasks):
    """Why GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (each run's emulator has its own CA) is in RUN_TIME_ENV."""
    from concurrent import futures

    import grpc

    tmp_path, env = tasks
    (tmp_path / "tls_dial.py").write_text(_TLS_DIAL)
    host = "us-central1-aiplatform.googleapis.com"
    key, cert, ca = trust.server_certificate(host)
    (tmp_path / "ca.pem").write_bytes(ca)
    (tmp_path / "other-ca.pem").write_bytes(trust.server_certificate(host)[2])
    tls = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = tls.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    tls.start()
    run = _dry_run(tmp_path, ["grpc"])
    try:
        children = []
        for roots in ("other-ca.pem", "ca.pem", "other-ca.pem"):  # the server starts with another run's CA
            with open(tmp_path / f"dial-{len(children)}.log", "a") as out:
                children.append(run.spawn([sys.executable, "-m", "tls_dial", f"127.0.0.1:{port}", host],
                                          {**env, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tmp_path / roots)},
                                          tmp_path, out))
        assert all(isinstance(c, forkserver.ForkedProcess) for c in children)
        # Trusted only with the CA that signed the server's certificate: the task's own file decides.
        assert [c.wait(timeout=60) for c in children] == [1, 0, 1]
    finally:
        run.end()
        tls.stop(grace=None)
