"""The fork server process: preload, check it is safe to fork, then fork one child per task and report its exit."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import os
import selectors
import signal
import socket
import sys
import threading
import time
from typing import Any

from pipeline.dryrun.forkserver.policy import fork_check, why_fresh
from pipeline.dryrun.forkserver.preload import preload
from pipeline.dryrun.forkserver.wire import receive, send


def serve(sock: socket.socket, parent: int, modules: list[str]) -> int:
    first, _ = receive(sock)
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
    send(sock, {"hello": True, "refused": refused, "failed": failed})
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
                    request, fds = receive(sock)
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
            send(sock, {"id": request["id"], "fresh": reason})
            return
        if pid == 0:
            _child(request, started, fds[0], sock, own)  # never returns
        children.add(pid)
        print(f"fork server: pid {pid}: {' '.join(request['argv'][1:3])}", file=sys.stderr, flush=True)
        send(sock, {"id": request["id"], "pid": pid, "argv": request["argv"][:3]})
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
            send(sock, {"exit": pid, "status": code})


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
