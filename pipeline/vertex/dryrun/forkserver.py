"""A fork server ("zygote") for the dry run's task processes: the imports are paid once, not per task.

Every container task and CustomJob replica of a dry run is `python -m <module> ...`,
and each used to spend 8-16 s importing TensorFlow, Beam, TFX, TFT and TFMA
before doing anything. `serving()` (around the runs of one `dry_run()`, run.py)
starts `python -m pipeline.vertex.dryrun.forkserver` on the first such command,
with that command's environment and cwd, and the process keeps it for its
next dry runs (a test session makes many): a later dry run uses it when it
preloaded the same modules and was started in the cwd of that run's first
task and with an environment that differs from it only in RUN_TIME_ENV;
else a new server replaces it (the console says why). It ends with the
process (at exit, or when the process dies: its socket closes); what a dry
run leaves running is stopped when that dry run ends. While it serves a dry
run its own messages go to that run's forkserver.log (the first run's log
has its start). The server imports what the spec's
tasks will import anyway (`preload_modules`: the imports of each entrypoint
module, at its top and in its functions, never the entrypoint itself, which
runs once as `__main__` as with `-m`;
the modules of the `--executor_class_path` classes; for TFX's Vertex training
extension the imports of the CustomJob's own entrypoint), freezes that heap out
of the garbage collector (the children's collections neither walk nor copy
it), and then forks one child per task: stdin from
/dev/null, stdout and stderr to the task's log (the very file descriptor the
launcher opened, passed over the socket), the request's environment, cwd and
argv (and what start-up and the imports added to the server's environment,
as they would add it to a fresh one), then
`runpy.run_module(module, run_name="__main__", alter_sys=True)`, the exit
status mapped as the interpreter maps it, non-daemon threads joined, exit
handlers run, open files flushed, `os._exit`. `start()` hands back a Popen-like
handle, so launcher.py and workers.py supervise a forked task as a fresh one.

Fresh processes instead (each says why, once, on the console), fail safe:
- `--fresh-processes`, or a command that is not `<this interpreter> -m <module>`,
  or a cwd other than the server's;
- a request whose environment differs from the server's in a variable not in
  RUN_TIME_ENV (variables known to be read when used, not at import: what
  differs between the tasks, runs and dry runs of one process), or in one
  whose import-time reader is loaded in the server;
- a server that fails its start checks: after the preload, exactly one Python
  thread and TensorFlow's eager context not initialized (multi-worker and TPU
  set-up need an untouched runtime, trainer/strategy.py), and after a probe fork
  no OS thread but the main one and jemalloc's background thread.

The threads a preload leaves (found with gdb, `thread apply all bt`): numpy's
and scipy's OpenBLAS each start a `blas_thread_server` pool (the two unnamed
threads; scipy.linalg is imported by TF), and pyarrow's bundled jemalloc
starts `jemalloc_bg_thd` (src/background_thread.c). Both libraries register
pthread_atfork handlers (both import `__register_atfork`): OpenBLAS's prepare
handler `blas_thread_shutdown` joins its pool before every fork, and the
pool is recreated on the next BLAS call in either process (checked: after a
fork the server has no OpenBLAS thread, a child's matmul starts one);
jemalloc's prefork takes all its locks and its child handler resets the
background-thread state, so the child starts without that thread and purges
inline. Neither leaves a lock held in the child. Any other thread fails the
check, so a new library that starts one turns the server off, not on.

What a forked task shares with the server, unlike a fresh container: the
imported modules and their import-time state (as an image's site-packages
would be, but also e.g. the one-time import warnings, which now go to the
server's first forkserver.log instead of every task log), the hash seed (set and dict order
of strings is the same in every task), numpy's global RandomState is reseeded
from the OS as at import; Python's `random` reseeds itself at fork. At exit
objects still alive are not finalized (no interpreter teardown, no C++ static
destructors) -- open Python files are flushed first. Each task is still its
own process, with its own pid, memory, environment, cwd, argv and exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import io
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from components.gcs import MOUNT_ENV
from pipeline.vertex.dryrun.gcs_emulator import EMULATOR_ENV

# Variables a request may carry with another value than the server's, because they are read when used,
# not when a module is imported; with the modules that do read them at import (the server must not have
# loaded those). Checked by grepping site-packages for module-level reads. All else fails closed.
_AIPLATFORM_ENV = ("google.cloud.aiplatform.training_utils.environment_variables",)  # module constants
RUN_TIME_ENV: dict[str, tuple[str, ...]] = {
    # What workers.py sets per replica. CLUSTER_SPEC: trainer/strategy.py _tf_config and TFX's tuner
    # executor read it when called; TF_CONFIG (strategy.py sets it from CLUSTER_SPEC): TF's
    # TFConfigClusterResolver reads os.environ when it resolves.
    "CLUSTER_SPEC": (),
    "TF_CONFIG": (),
    # Each run's Vertex emulator (customjob.py) has its own port. gRPC's core reads it when it creates a
    # channel (http_proxy_mapper; grpc doc/environment_variables.md), tested in test_forkserver.py.
    "grpc_proxy": (),
    # The rest of each run's Vertex emulator: gRPC loads its default roots on a process's first TLS channel
    # (tested in test_forkserver.py); google.auth.default() reads the key's path when called
    # (google/auth/_default.py, _get_explicit_environ_credentials).
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": (),
    "GOOGLE_APPLICATION_CREDENTIALS": (),
    # Each dry run's fake-gcs-server and bucket mount (gcs_emulator.py): google-cloud-storage reads the host when
    # a Client is made (google/cloud/storage/_helpers.py, _get_storage_emulator_override), components/gcs.py
    # the mount when it maps a path (api_uri).
    EMULATOR_ENV: (),
    MOUNT_ENV: (),
    # pytest names the test phase running in its process (so in each task of a test's dry run); only functions
    # read it (google/genai/_replay_api_client.py _debug_print, ipykernel/iostream.py OutStream.__init__).
    "PYTEST_CURRENT_TEST": (),
    "AIP_MODEL_DIR": _AIPLATFORM_ENV,
    "AIP_CHECKPOINT_DIR": _AIPLATFORM_ENV,
    "AIP_TENSORBOARD_LOG_DIR": _AIPLATFORM_ENV,
}
# The one thread a preload may leave running besides the main one (see the module docstring).
FORK_SAFE_THREADS = ("jemalloc_bg_thd",)
_HEADER = struct.Struct("!I")

_active: Optional["Run"] = None     # the dry run whose tasks start() forks
_kept: Optional["Server"] = None    # this process's fork server, kept for its next dry run
_kept_lock = threading.Lock()


# -- the dry run's side ---------------------------------------------------------------

@contextlib.contextmanager
def serving(template: Path, log: Path, console, fresh: bool = False) -> Iterator[Optional["Run"]]:
    """The fork server's service to one dry run of the spec `template` (see Run); none with `fresh`."""
    if fresh:
        console.write("task processes: each started fresh (--fresh-processes)\n")
        yield None
        return
    console.write("task processes: `python -m` commands are forked from a fork server that imports the "
                  f"tasks' modules once per process (log: {log}); --fresh-processes starts each fresh\n")
    with active(Run(preload_modules(template), log, console)) as run:
        yield run


@contextlib.contextmanager
def active(run: "Run") -> Iterator["Run"]:
    """`start()` forks for `run` inside this block; what is still running of it is stopped after it."""
    global _active
    previous, _active = _active, run
    try:
        yield run
    finally:
        _active = previous
        run.end()


def start(command: list[str], env: dict[str, str], cwd, stdout) -> Any:
    """The process of one task or replica: forked by the active run's fork server when it can, else fresh.
    stdout: an open file; stderr goes there too."""
    run = _active
    child = run.spawn(command, env, cwd, stdout) if run is not None else None
    if child is not None:
        return child
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=stdout, stderr=subprocess.STDOUT)


class Run:
    """One dry run's use of this process's fork server. Its first `python -m` task picks the server: the one an
    earlier dry run of this process left, if it preloaded the same modules and was started with this task's cwd
    and an environment that differs only in RUN_TIME_ENV; else a new one, started with this task's environment
    (the one it replaces is closed). The server's messages go to this run's `log`, ours to its `console`.
    One dry run at a time per process: start() forks for the active one."""

    def __init__(self, modules: list[str], log: Path, console):
        self.modules, self.log, self.console = modules, Path(log), console
        self.server: Optional[Server] = None
        self._lock = threading.Lock()
        self._said: set[str] = set()

    def spawn(self, command: list[str], env: dict[str, str], cwd, stdout) -> Optional["ForkedProcess"]:
        """A forked child running `command`, or None when it must run as a fresh process (said once)."""
        if len(command) < 3 or command[1] != "-m" or command[0] != sys.executable:
            return None  # not `python -m module`: fresh, as it always was
        with self._lock:
            if self.server is None:
                self.server = _server_for(self, env, cwd)
        return self.server.spawn(command, env, cwd, stdout)

    def end(self) -> None:
        """No task outlives its dry run (one that failed may leave some running); the server is kept."""
        if self.server is not None:
            self.server.stop_children()
            self.server.run = None

    def say(self, text: str, key: str) -> None:
        if key not in self._said:
            self._said.add(key)
            self.console.write(text + "\n")
            self.console.flush()


def _server_for(run: Run, env: dict[str, str], cwd) -> "Server":
    """The kept server if it fits `run` (see Run), else a new one, kept in its place."""
    global _kept
    with _kept_lock:
        if _kept is not None:
            unfit = _kept.unfit(run.modules, env, cwd)
            if unfit is None:
                _kept.serve(run)
                return _kept
            why = f"a new fork server: the one an earlier dry run of this process left {unfit}"
            run.say(f"  {why}", key="new")
            run.log.parent.mkdir(parents=True, exist_ok=True)
            with open(run.log, "a") as log:
                log.write(why + "\n")
            _kept.close()
        atexit.unregister(close_kept)
        atexit.register(close_kept)
        _kept = Server(run.modules, run, env, cwd)
        return _kept


def close_kept() -> None:
    """End this process's fork server (at exit; tests that must not leave theirs running)."""
    global _kept
    with _kept_lock:
        server, _kept = _kept, None
    if server is not None:
        server.close()


class ForkedProcess:
    """The Popen methods the dry run uses, for a child of the fork server."""

    def __init__(self, server: "Server", pid: int, args: list[str]):
        self.server, self.pid, self.args = server, pid, args
        self.returncode: Optional[int] = None
        self._done = threading.Event()

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.server.signal(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _exited(self, status: int) -> None:
        self.returncode = status
        self._done.set()


class Server:
    """The client of one fork server process, started with `env` and `cwd` for `run`'s first task and kept for the
    process's next dry runs; thread-safe (replicas start from workers.py's thread)."""

    def __init__(self, modules: list[str], run: Run, env: dict[str, str], cwd):
        self.modules, self.run = modules, run     # run: the dry run it serves now, where its messages go
        # The environment it was given, before the interpreter's start (e.g. PEP 538's LC_CTYPE) and the imports
        # changed it: what requests are compared with.
        self.start_env, self.cwd, self.first_log = dict(env), str(cwd), run.log
        self.refused: Optional[str] = None      # why nothing is forked any more
        self._send_lock = threading.Lock()
        self._hello = threading.Event()
        self._replies: dict[int, dict] = {}
        self._reply_ready = threading.Condition()
        self._children: dict[int, ForkedProcess] = {}
        self._next_id = 0
        ours, theirs = socket.socketpair()
        run.log.parent.mkdir(parents=True, exist_ok=True)
        with open(run.log, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno()), str(os.getpid()), *modules],
                env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=[theirs.fileno()])
        theirs.close()
        self._sock = ours
        with contextlib.suppress(OSError):  # a server that died at once is reported by _read
            _send(ours, {"op": "start", "env": env})
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()

    def unfit(self, modules: list[str], env: dict[str, str], cwd) -> Optional[str]:
        """Why this server cannot serve a dry run whose first task has `env` and `cwd`; None if it can."""
        if self.refused is not None:
            return f"forks no more ({self.refused})"
        if self.process.poll() is not None:
            return "has exited"
        if modules != self.modules:
            return "preloaded other modules (another spec)"
        why = why_fresh({"argv": [sys.executable, "-m", "-"], "env": env, "cwd": str(cwd)}, self.start_env,
                        self.cwd, ())
        return f"cannot fork its tasks: {why}" if why else None

    def serve(self, run: Run) -> None:
        """Serve the next dry run: the server's messages go to its log from here on."""
        self.run = run
        run.log.parent.mkdir(parents=True, exist_ok=True)
        with open(run.log, "a") as log:
            log.write(f"fork server {self.process.pid}: kept from an earlier dry run of this process (its start: "
                      f"{self.first_log}); serving this one\n")
            log.flush()
            try:
                with self._send_lock:
                    _send(self._sock, {"op": "log"}, [log.fileno()])
            except OSError as e:
                self._refuse(f"the fork server cannot be reached ({e})")
        run.console.write(f"  fork server {self.process.pid} (kept from an earlier dry run of this process, same "
                          "preload) forks this run's tasks\n")

    def spawn(self, command: list[str], env: dict[str, str], cwd, stdout) -> Optional[ForkedProcess]:
        """A forked child running `command`, or None when it must run as a fresh process (said once)."""
        self._hello.wait()
        if self.refused is not None:
            return None
        with self._reply_ready:
            self._next_id += 1
            request_id = self._next_id
        request = {"op": "spawn", "id": request_id, "argv": command, "env": env, "cwd": str(cwd)}
        try:
            with self._send_lock:
                _send(self._sock, request, [stdout.fileno()])
        except OSError as e:
            self._refuse(f"the fork server cannot be reached ({e})")
            return None
        with self._reply_ready:
            self._reply_ready.wait_for(lambda: request_id in self._replies or self.refused is not None)
            reply = self._replies.pop(request_id, None)
        if reply is None:
            return None
        if "fresh" in reply:
            self._say(f"  {Path(stdout.name).stem}: a fresh process: {reply['fresh']}", key=reply["fresh"])
            return None
        return reply["child"]

    def signal(self, pid: int, sig: int) -> None:
        with contextlib.suppress(OSError), self._send_lock:
            _send(self._sock, {"op": "signal", "pid": pid, "sig": int(sig)})

    def stop_children(self, grace: float = 10) -> None:
        """Stop what still runs (SIGTERM, after `grace` seconds SIGKILL) and wait until the server reaped it."""
        live = [child for child in list(self._children.values()) if child.returncode is None]
        for child in live:
            child.terminate()
        deadline = time.monotonic() + grace
        for child in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=60)

    def close(self) -> None:
        """End the server: its live children are stopped and reaped, then it exits."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=10)
        self._sock.close()

    # -- internals ----------------------------------------------------------------------

    def _read(self) -> None:
        """The server's replies: its start report, spawn answers, exit statuses."""
        try:
            while True:
                message, _ = _receive(self._sock)
                if message is None:
                    break
                if "hello" in message:
                    if message["refused"]:
                        self._refuse(f"the fork server refused to fork: {message['refused']}")
                    self._hello.set()
                elif "id" in message:
                    if "pid" in message:
                        child = ForkedProcess(self, message["pid"], message["argv"])
                        self._children[child.pid] = child
                        message["child"] = child
                    with self._reply_ready:
                        self._replies[message["id"]] = message
                        self._reply_ready.notify_all()
                elif "exit" in message:
                    child = self._children.pop(message["exit"], None)
                    if child is not None:
                        child._exited(message["status"])
        except OSError:
            pass
        # The server is gone: what it did not report cannot be known; its children are not left running.
        if self.refused is None and self._children:
            self._refuse("the fork server exited while tasks ran (see its log)")
        for pid, child in list(self._children.items()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            child._exited(-signal.SIGKILL)
        self._children.clear()
        if not self._hello.is_set():
            self._refuse(f"the fork server exited while starting (log: {self.first_log})")
        self._hello.set()
        with self._reply_ready:
            self.refused = self.refused or "the fork server has exited"
            self._reply_ready.notify_all()

    def _refuse(self, why: str) -> None:
        if self.refused is None:
            self.refused = why
            self._say(f"  FRESH PROCESSES: {why}; every further task of this dry run runs as a fresh process",
                      key=why)

    def _say(self, text: str, key: str) -> None:
        run = self.run
        if run is not None:  # between dry runs nobody listens; the next one is told why it gets a new server
            run.say(text, key)


def preload_modules(template: Path) -> list[str]:
    """What the tasks of a compiled spec (Vertex JSON or Kubeflow YAML) import before their own work."""
    import importlib.util

    import yaml

    text = Path(template).read_text()
    body = json.loads(text) if Path(template).suffix == ".json" else yaml.safe_load(text)
    spec = body.get("pipelineSpec", body)
    modules: list[str] = []
    for executor in spec.get("deploymentSpec", {}).get("executors", {}).values():
        container = executor.get("container")
        if not container:
            continue
        hooks = [h for h in container.get("lifecycle", {}).values() if isinstance(h, dict)]
        for part in (container, *hooks):
            command = [*part.get("command", []), *part.get("args", [])]
            if len(command) > 2 and command[1] == "-m":
                modules += imports_of(command[2], importlib.util.find_spec)
            for i, arg in enumerate(command[:-1]):
                if arg == "--executor_class_path":
                    executor_module = command[i + 1].rpartition(".")[0]
                    modules.append(executor_module)
                    if executor_module.startswith("tfx.extensions.google_cloud_ai_platform."):
                        # Its CustomJob runs TFX's own entrypoint in each replica.
                        from tfx.extensions.google_cloud_ai_platform import training_clients

                        modules += imports_of(training_clients._CONTAINER_COMMAND[2], importlib.util.find_spec)
    return list(dict.fromkeys(modules))


def imports_of(module: str, find_spec: Callable) -> list[str]:
    """What `module` imports (it runs as __main__ itself), at its top or in its functions (an entrypoint may
    import its framework when called): `name` for `import name`, `module:name` for `from module import name`."""
    import ast

    spec = find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    tree = ast.parse(Path(spec.origin).read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [f"{node.module}:{a.name}" for a in node.names]
    return names


# -- the wire: length-prefixed JSON, file descriptors with the first bytes -------------------

def _send(sock: socket.socket, message: dict, fds: tuple = ()) -> None:
    data = json.dumps(message).encode()
    data = _HEADER.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    sock.sendall(data[sent:])


def _receive(sock: socket.socket) -> tuple[Optional[dict], list[int]]:
    header, fds, _, _ = socket.recv_fds(sock, _HEADER.size, 4)
    if not header:
        return None, fds
    while len(header) < _HEADER.size:
        more = sock.recv(_HEADER.size - len(header))
        if not more:
            return None, fds
        header += more
    (size,) = _HEADER.unpack(header)
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None, fds
        chunks.append(chunk)
        remaining -= len(chunk)
    return json.loads(b"".join(chunks)), fds


# -- the server: python -m pipeline.vertex.dryrun.forkserver <socket fd> <parent pid> <module>... --

def why_fresh(request: dict, start_env: dict[str, str], cwd: str, loaded) -> Optional[str]:
    """Why this request cannot be forked from a server started with `start_env` in `cwd`, None if it can."""
    argv = request["argv"]
    if len(argv) < 3 or argv[1] != "-m" or os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
        return "not `python -m module` with the server's interpreter"
    if os.path.realpath(request["cwd"]) != os.path.realpath(cwd):
        return f"its cwd {request['cwd']} is not the fork server's {cwd}"
    env = request["env"]
    differing = sorted(k for k in set(env) | set(start_env) if env.get(k) != start_env.get(k))
    unsafe = []
    for key in differing:
        if key not in RUN_TIME_ENV:
            unsafe.append(key)
        elif any(m in loaded for m in RUN_TIME_ENV[key]):
            unsafe.append(f"{key} (read at import by {', '.join(m for m in RUN_TIME_ENV[key] if m in loaded)})")
    if unsafe:
        return f"its environment differs from the fork server's in {', '.join(unsafe)}, which may be read at import"
    return None


def fork_check() -> Optional[str]:
    """Why forking from this process would not be safe (None: safe); see the module docstring."""
    python_threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if python_threads:
        return f"Python threads are running after the preload: {', '.join(python_threads)}"
    context = sys.modules.get("tensorflow.python.eager.context")
    if context is not None:
        ctx = context.context_safe()
        if ctx is not None and ctx._initialized:
            return "TensorFlow's eager context was initialized by the preload"
    # OpenBLAS stops its pool before a fork (its atfork handler); what is left must be known to be safe.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    others = []
    for tid in sorted(os.listdir("/proc/self/task")):
        if int(tid) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            if name not in FORK_SAFE_THREADS:
                others.append(f"{tid} ({name})")
    if others:
        return f"OS threads of unknown fork safety are running: {', '.join(others)}"
    return None


def preload(entry: str) -> None:
    """`import module` for "module", `from module import name` for "module:name"."""
    import importlib

    module, _, name = entry.partition(":")
    imported = importlib.import_module(module)
    if name and name != "*" and not hasattr(imported, name):
        importlib.import_module(f"{module}.{name}")


def serve(sock: socket.socket, parent: int, modules: list[str]) -> int:
    first, _ = _receive(sock)
    if first is None:
        return 0
    start_env, cwd = first["env"], os.getcwd()
    started, failed = time.monotonic(), []
    for entry in modules:
        try:
            preload(entry)
        except Exception as e:  # noqa: BLE001 - the task will meet (and report) the same failure itself
            failed.append(f"{entry}: {type(e).__name__}: {e}")
    # What start-up and the imports did to the environment, they would do in a fresh process too: each child
    # gets it.
    env_changes = {k: os.environ.get(k) for k in set(os.environ) | set(start_env)
                   if os.environ.get(k) != start_env.get(k)}
    gc.collect()
    gc.freeze()  # the children's collections skip the shared heap (and do not copy its pages)
    refused = fork_check()
    print(f"fork server {os.getpid()}: {len(modules)} imports preloaded in {time.monotonic() - started:.1f}s"
          + (f"\n  start-up and imports changed the environment: {sorted(env_changes)}" if env_changes else "")
          + "".join(f"\n  not importable: {f}" for f in failed)
          + (f"\n  REFUSED: {refused}" if refused else ""), file=sys.stderr, flush=True)
    _send(sock, {"hello": True, "refused": refused, "failed": failed})
    if refused:
        return 0
    children: set[int] = set()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    try:
        while True:
            for key, _ in selector.select(timeout=5):
                if key.fileobj is sock:
                    request, fds = _receive(sock)
                    if request is None:
                        return 0
                    _handle(request, fds, sock, (start_env, env_changes, cwd), children,
                            (selector, wake_r, wake_w))
                else:
                    os.read(wake_r, 4096)
            _reap(sock, children)
            if os.getppid() != parent:
                return 0
    finally:
        _stop(children, sock)


def _handle(request: dict, fds: list[int], sock: socket.socket, started: tuple, children: set,
            own: tuple) -> None:
    start_env, env_changes, cwd = started
    try:
        if request["op"] == "signal":
            if request["pid"] in children:
                os.kill(request["pid"], request["sig"])
            return
        if request["op"] == "log":  # the next dry run's log: our own messages go there from now on
            sys.stdout.flush()
            sys.stderr.flush()
            _flush_c_stdio()
            os.dup2(fds[0], 1)
            os.dup2(fds[0], 2)
            return
        reason = why_fresh(request, start_env, cwd, sys.modules) or ("" if fds else "no log file came with it")
        if not reason:
            _flush_c_stdio()
            try:
                pid = os.fork()
            except OSError as e:
                reason = f"fork failed: {e}"
        if reason:
            _send(sock, {"id": request["id"], "fresh": reason})
            return
        if pid == 0:
            _child(request, started, fds[0], sock, own)  # never returns
        children.add(pid)
        print(f"fork server: pid {pid}: {' '.join(request['argv'][1:3])}", file=sys.stderr, flush=True)
        _send(sock, {"id": request["id"], "pid": pid, "argv": request["argv"][:3]})
    finally:
        for fd in fds:
            os.close(fd)


def _child(request: dict, started: tuple, out: int, sock: socket.socket, own: tuple) -> None:
    """The task, in the forked child: set up as a fresh `python -m` would be, run, exit; never returns."""
    start_env, env_changes, _ = started
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sock.close()
        selector, *pipe = own
        selector.close()
        for fd in pipe:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(out, 1)
        os.dup2(out, 2)
        if out > 2:
            os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for key, value in env_changes.items():
            if request["env"].get(key) != start_env.get(key):
                continue  # a run-time variable the request sets itself
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()  # as a fresh import seeds it, from the OS
        sys.argv = ["-m", *request["argv"][3:]]  # run_module puts the module's file in argv[0], as -m does
        code = run_as_main(request["argv"][2])
    except BaseException:  # noqa: BLE001 - the child must never return into the server's loop
        with contextlib.suppress(BaseException):
            sys.excepthook(*sys.exc_info())
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        _flush_c_stdio()  # exit() would; _exit() does not
        os._exit(code)


def run_as_main(module: str) -> int:
    """`python -m module` from here on: its exit status, after what the interpreter does at exit."""
    import runpy

    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_status(e.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = 128 + signal.SIGINT  # the interpreter re-raises SIGINT; killed below
        _finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return code
    except BaseException:  # noqa: BLE001 - an uncaught exception: traceback to stderr, status 1
        sys.excepthook(*sys.exc_info())
        code = 1
    _finish()
    return code


def _finish() -> None:
    """Py_FinalizeEx's first steps: wait for non-daemon threads, run the exit handlers; then flush open files."""
    import atexit

    threading._shutdown()  # noqa: SLF001 - what the interpreter itself calls at exit
    atexit._run_exitfuncs()  # noqa: SLF001
    for obj in gc.get_objects():
        if isinstance(obj, (io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)):
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.flush()


def _exit_status(code: Any) -> int:
    """As the interpreter maps SystemExit.code (pythonrun.c, handle_system_exit)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        with contextlib.suppress(OSError):
            _send(sock, {"exit": pid, "status": code})


def _stop(children: set[int], sock: socket.socket) -> None:
    """No task outlives the server (nor the dry run process: its end closes our socket), none is left a zombie."""
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while children and time.monotonic() < deadline:
        _reap(sock, children)
        time.sleep(0.05)
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    children.clear()


def _flush_c_stdio() -> None:
    """A C library's buffered stdout would otherwise be written again by every child."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


def main(argv: list[str]) -> int:
    fd, parent, modules = int(argv[0]), int(argv[1]), argv[2:]
    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the tasks and the dry run, which closes us
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # The dry run's end, or its death (even by SIGKILL), closes its end of the socket: we stop then.
    # (Not PR_SET_PDEATHSIG: it fires when the *thread* that started us ends, e.g. a CustomJob's.)
    return serve(sock, parent, modules)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
