"""One run at a time per pipeline root: a lock file holding who runs.

A schedule and a person may start runs on the same root at once; both would
train, both would decide against the same (old) baseline and both would push.
`<root>/run.lock` is created with O_EXCL (atomic on a local file system) and
names the holder's pid, host and start time. A second run waits for it, up to
`pipeline.lock_wait_seconds`, then refuses naming the holder. A lock whose
holder is a dead process on this host is stale (the run was killed) and is
taken over; a holder on another host cannot be checked, so its lock stands
until a person removes the file (the message says which).

On Vertex the schedule's `max_concurrent_runs` (1) does this job.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from typing import Callable, Iterator, Optional

from pipeline.errors import CommandFailed

LOCK_FILE = "run.lock"


class RunLocked(CommandFailed):
    """Another run holds the pipeline root's lock. Exit 5."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_holder(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except ValueError:  # being written right now, or truncated by a crash
        return {}


def _is_stale(holder: dict) -> bool:
    return holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int) \
        and not _alive(holder["pid"])


def _try_create(path: str) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    body = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with os.fdopen(fd, "w") as f:
        json.dump(body, f)
    return True


@contextlib.contextmanager
def run_lock(root: str, wait_seconds: float, poll_seconds: float = 1.0,
             say: Callable[[str], None] = lambda _: None) -> Iterator[None]:
    """Hold <root>/run.lock for the duration; wait up to wait_seconds for another run, else RunLocked."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, LOCK_FILE)
    deadline, announced = time.monotonic() + wait_seconds, False
    while not _try_create(path):
        holder = read_holder(path)
        if holder and _is_stale(holder):
            say(f"removing stale run lock {path} (pid {holder['pid']} on this host is gone)")
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            continue
        if time.monotonic() >= deadline:
            raise RunLocked(
                f"another run holds {path} ({_describe(holder)}); waited {wait_seconds:g} s "
                "(pipeline.lock_wait_seconds). If that run is gone, delete the file.")
        if not announced:
            say(f"waiting for the run holding {path} ({_describe(holder)}), up to {wait_seconds:g} s")
            announced = True
        time.sleep(poll_seconds)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _describe(holder: Optional[dict]) -> str:
    if not holder:
        return "holder unknown"
    return f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}"
