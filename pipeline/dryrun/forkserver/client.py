"""The dry run's side of the fork server: start it, keep it for the process's next dry runs, fork tasks through it."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from pipeline.dryrun.forkserver.policy import why_fresh
from pipeline.dryrun.forkserver.preload import preload_modules
from pipeline.dryrun.forkserver.wire import receive, send

# The server process: python -m pipeline.dryrun.forkserver <socket fd> <parent pid> <module>...
SERVER_MODULE = "pipeline.dryrun.forkserver"

_active: Optional["Run"] = None     # the dry run whose tasks start() forks
_kept: Optional["Server"] = None    # this process's fork server, kept for its next dry run
_kept_lock = threading.Lock()


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
                [sys.executable, "-m", SERVER_MODULE, str(theirs.fileno()), str(os.getpid()), *modules],
                env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=[theirs.fileno()])
        theirs.close()
        self._sock = ours
        with contextlib.suppress(OSError):  # a server that died at once is reported by _read
            send(ours, {"op": "start", "env": env})
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
                    send(self._sock, {"op": "log"}, [log.fileno()])
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
                send(self._sock, request, [stdout.fileno()])
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
            send(self._sock, {"op": "signal", "pid": pid, "sig": int(sig)})

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
                message, _ = receive(self._sock)
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
