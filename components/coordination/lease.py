"""Who runs on a pipeline root: one run at a time, on a local disk or on a gs:// root.
Why and sources: docs/internals.md."""

from __future__ import annotations

import calendar
import contextlib
import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Callable, Iterator, Optional

from components import gcs
from components.coordination.job_state import JobStates
from components.errors import LeaseBusy, LeaseLost

log = logging.getLogger(__name__)

LOCK_FILE = "run.lock"
# A gs:// lease not heartbeaten for this long is stale; its holder heartbeats every third of it.
DEFAULT_TTL_SECONDS = 600.0
# When no run holds a lease (a run killed before its exit handler ran, a root no run leases), another
# run's leftovers are debris only after this long: far longer than a push copies a model or Transform
# writes its cache.
UNLEASED_GRACE_SECONDS = 3600.0
# How often a waiting run asks a live holder's backend whether that run has ended.
ASK_EVERY_SECONDS = 30.0
_ISO = "%Y-%m-%dT%H:%M:%SZ"


def _iso(t: float) -> str:
    return time.strftime(_ISO, time.gmtime(t))


@dataclasses.dataclass(frozen=True)
class Holder:
    owner: str = ""       # the run (a gs:// lease) or "" (a local lock names no run)
    host: str = ""
    pid: Optional[int] = None
    acquired: Optional[float] = None
    expires: Optional[float] = None   # gs:// only
    released: bool = False            # gs:// only
    nonce: str = ""                   # tells a holder's own retried create from another's
    run_id: str = ""                  # the run's id on its backend, when the owner is not enough to ask it

    @classmethod
    def parse(cls, text: str) -> Optional["Holder"]:
        try:
            body = json.loads(text)
        except ValueError:  # being written right now, or truncated by a crash
            return None
        if not isinstance(body, dict):
            return None
        acquired = body.get("acquired")
        if acquired is None and isinstance(body.get("started"), str):  # a lock file written before "acquired"
            with contextlib.suppress(ValueError):
                acquired = float(calendar.timegm(time.strptime(body["started"], _ISO)))
        return cls(owner=str(body.get("owner", "")), host=str(body.get("host", "")), pid=body.get("pid"),
                   acquired=acquired, expires=body.get("expires"), released=bool(body.get("released")),
                   nonce=str(body.get("nonce", "")), run_id=str(body.get("run_id", "")))

    def body(self) -> bytes:
        out = {"owner": self.owner, "host": self.host, "pid": self.pid, "acquired": self.acquired,
               "started": _iso(self.acquired or 0), "expires": self.expires, "released": self.released,
               "nonce": self.nonce, "run_id": self.run_id}
        return json.dumps({k: v for k, v in out.items() if v not in (None, "")}).encode()

    def live(self, now: float) -> bool:
        return not self.released and (self.expires is None or now < self.expires)

    def describe(self) -> str:
        parts = [f"run {self.owner}" if self.owner else "",
                 f"pid {self.pid} on {self.host}" if self.host else "",
                 f"started {_iso(self.acquired)}" if self.acquired is not None else "",
                 f"expires {_iso(self.expires)}" if self.expires is not None else ""]
        return ", ".join(p for p in parts if p) or "holder unknown"


def busy_message(where: str, holder: Optional[Holder], wait_seconds: float, hint: str) -> str:
    return (f"another run holds {where} ({holder.describe() if holder else 'holder unknown'}); "
            f"waited {wait_seconds:g} s (pipeline.lock_wait_seconds). {hint}")


def lock_uri(root: str) -> str:
    return f"{root.rstrip('/')}/{LOCK_FILE}"


# ---------------------------------------------------------------- local: O_EXCL


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_local(path: str) -> Optional[Holder]:
    """The holder named by a local lock file; None when there is none, Holder() when it is unreadable."""
    try:
        with open(path) as f:
            return Holder.parse(f.read()) or Holder()
    except FileNotFoundError:
        return None


def _stale_local(holder: Holder) -> bool:
    return holder.host == socket.gethostname() and isinstance(holder.pid, int) and not _alive(holder.pid)


def _create_local(path: str) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(Holder(host=socket.gethostname(), pid=os.getpid(), acquired=time.time()).body().decode())
    return True


@contextlib.contextmanager
def local_lock(root: str, wait_seconds: float, poll_seconds: float = 1.0,
               say: Callable[[str], None] = lambda _: None) -> Iterator[None]:
    """Hold <root>/run.lock (a local directory) for the duration; wait up to wait_seconds, else LeaseBusy."""
    os.makedirs(root, exist_ok=True)
    path = lock_uri(root)
    deadline, announced = time.monotonic() + wait_seconds, False
    while not _create_local(path):
        holder = read_local(path)
        if holder and _stale_local(holder):
            say(f"removing stale run lock {path} (pid {holder.pid} on this host is gone)")
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            continue
        if time.monotonic() >= deadline:
            raise LeaseBusy(busy_message(path, holder, wait_seconds, "If that run is gone, delete the file."))
        if not announced:
            say(f"waiting for the run holding {path} ({holder.describe() if holder else 'holder unknown'}), "
                f"up to {wait_seconds:g} s")
            announced = True
        time.sleep(poll_seconds)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


# ---------------------------------------------------------------- gs://: generation preconditions


class GcsLease:
    """The lease object <root>/run.lock on a gs:// root, held by `owner` (a run id)."""

    def __init__(self, root: str, owner: str, ttl_seconds: float = DEFAULT_TTL_SECONDS, gcs_client=None,
                 clock: Callable[[], float] = time.time, run_id: str = "", jobs: Optional[JobStates] = None):
        if ttl_seconds <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl_seconds}")
        self.uri, self.owner, self.ttl, self.client, self.clock = lock_uri(root), owner, ttl_seconds, gcs_client, clock
        self.run_id = run_id
        # Asked whether a live holder's run has ended (job_state.py): a finished holder never blocks.
        self.jobs = jobs
        self._asked: dict[str, float] = {}  # holder nonce -> when its backend was last asked
        self.nonce = uuid.uuid4().hex
        self.generation: Optional[int] = None
        self.acquired: Optional[float] = None
        self.taken_over: Optional[Holder] = None  # the stale or finished holder this lease replaced, if any
        self.holder_ended: Optional[str] = None   # the taken-over holder's run's terminal state, when that was why

    def _holder(self, released: bool = False) -> Holder:
        now = self.clock()
        return Holder(owner=self.owner, host=socket.gethostname(), pid=os.getpid(), acquired=self.acquired or now,
                      expires=now + self.ttl, released=released, nonce=self.nonce, run_id=self.run_id)

    def try_acquire(self) -> Optional[Holder]:
        """Take the lease if it is free, released or expired: None when taken, else the live holder."""
        while True:
            generation = gcs.create(self.uri, self._holder().body(), self.client)
            if generation is not None:
                self.generation, self.acquired = generation, self.acquired or self.clock()
                return None
            current = gcs.read(self.uri, self.client)
            if current is None:  # released by a delete in between (a person): create again
                continue
            holder = Holder.parse(current.body.decode(errors="replace"))
            # Our own create, retried by the client; or, on Vertex, a retried first task of this same run.
            if holder is not None and not holder.released and (
                    holder.nonce == self.nonce or (holder.owner and holder.owner == self.owner)):
                self.generation, self.acquired, self.nonce = current.generation, holder.acquired, holder.nonce
                return None
            if holder is None:  # unreadable: live until ttl after its last write, by the server's clock
                holder = Holder(expires=current.updated + self.ttl)
            ended = self._ended(holder) if holder.live(self.clock()) else None
            if holder.live(self.clock()) and ended is None:
                return holder
            self.acquired = self.clock()
            generation = gcs.replace(self.uri, self._holder().body(), current.generation, self.client)
            if generation is None:  # another waiter took it first; look again
                self.acquired = None
                continue
            self.generation = generation
            if not holder.released:
                self.taken_over, self.holder_ended = holder, ended
                log.warning("took over the run lease %s from %s (%s without a release)", self.uri, holder.describe(),
                            f"its run is over: {ended}" if ended else "it expired")
            return None

    def _ended(self, holder: Holder) -> Optional[str]:
        """The terminal state of a live holder's run, asked of its backend at most every ASK_EVERY_SECONDS."""
        if self.jobs is None or not holder.owner:
            return None
        now = self.clock()
        if now - self._asked.get(holder.nonce, float("-inf")) < ASK_EVERY_SECONDS:
            return None
        self._asked[holder.nonce] = now
        return self.jobs.ended(holder.owner, holder.run_id)

    def acquire(self, wait_seconds: float, poll_seconds: float = 1.0,
                say: Callable[[str], None] = lambda _: None) -> "GcsLease":
        deadline, announced = time.monotonic() + wait_seconds, False
        while (holder := self.try_acquire()) is not None:
            if time.monotonic() >= deadline:
                ended = "its run is over (its backend is asked) or " if self.jobs else ""
                raise LeaseBusy(busy_message(self.uri, holder, wait_seconds,
                                             f"It is taken over once {ended}it expires ({self.ttl:g} s without a "
                                             "heartbeat)."))
            if not announced:
                say(f"waiting for the run holding {self.uri} ({holder.describe()}), up to {wait_seconds:g} s")
                announced = True
            time.sleep(poll_seconds)
        if self.taken_over is not None:
            why = f"its run is over ({self.holder_ended})" if self.holder_ended else "it expired"
            say(f"took over the run lease {self.uri} from {self.taken_over.describe()}: {why}")
        return self

    def heartbeat(self) -> None:
        """Push the expiry forward; LeaseLost when another run took the lease over."""
        if self.generation is None:
            raise LeaseLost(f"{self.uri}: not held")
        generation = gcs.replace(self.uri, self._holder().body(), self.generation, self.client)
        if generation is None:
            self.generation = None
            raise LeaseLost(f"the run lease {self.uri} was taken over by another run (it had expired)")
        self.generation = generation

    def release(self) -> bool:
        """Mark it released, if this run still holds it (its generation unchanged); False when it did not."""
        if self.generation is None:
            return False
        generation, self.generation = self.generation, None
        return gcs.replace(self.uri, self._holder(released=True).body(), generation, self.client) is not None

    @contextlib.contextmanager
    def kept_alive(self, release: bool = True) -> Iterator["GcsLease"]:
        """Heartbeat every third of the ttl while the body runs; release at the end (also on failure) unless
        `release` is False (a task of an orchestrated run: the run goes on, its exit handler releases)."""
        stop = threading.Event()

        def beat():
            while not stop.wait(self.ttl / 3):
                try:
                    self.heartbeat()
                except LeaseLost as e:
                    log.error("%s", e)
                    return
                except Exception:  # noqa: BLE001 - a missed beat is retried; expiry is ttl away
                    log.exception("heartbeat of %s failed; retrying", self.uri)

        thread = threading.Thread(target=beat, name="run-lease-heartbeat", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            if release:
                self.release()


def read_gcs(root: str, gcs_client=None) -> Optional[Holder]:
    current = gcs.read(lock_uri(root), gcs_client)
    # Unreadable: a holder unknown, live (fail closed).
    return (Holder.parse(current.body.decode(errors="replace")) or Holder()) if current else None


# ---------------------------------------------------------------- a run on Vertex or Kubeflow Pipelines
#
# No process lives through such a run: its tasks are containers that come and go. The run's first task
# takes the lease (`take_for_run`) and leaves it held; a task that writes what another run could damage
# (the Pusher) adopts it as the same owner and heartbeats it while it works (`adopt`: LeaseLost when the
# run no longer holds it); the run's exit handler, which the backend runs after the run's tasks whether
# they succeeded or failed, releases it (`release_for_run`). The owner is the run itself: the pipeline
# job's resource name, which the backend fills into every task of one run alike.


def _gcs_root(root: str) -> str:
    uri = gcs.api_uri(root)
    if not gcs.is_gcs(uri):
        raise ValueError(f"the run lease of a Vertex or Kubeflow run needs a gs:// pipeline root, got {root!r}")
    return uri


def take_for_run(root: str, owner: str, wait_seconds: float, ttl_seconds: float, poll_seconds: float = 1.0,
                 say: Callable[[str], None] = lambda _: None, gcs_client=None, run_id: str = "",
                 jobs: Optional[JobStates] = None) -> GcsLease:
    """Take the root's lease for run `owner` (waiting up to wait_seconds, else LeaseBusy) and leave it held; a
    holder whose run `jobs` says is over is taken over at once."""
    if not owner:
        raise ValueError("the run lease needs an owner (the pipeline job's resource name)")
    return GcsLease(_gcs_root(root), owner, ttl_seconds, gcs_client, run_id=run_id, jobs=jobs).acquire(
        wait_seconds, poll_seconds, say)


def adopt(root: str, owner: str, ttl_seconds: float, gcs_client=None) -> GcsLease:
    """The lease run `owner` holds on the root, renewed now by this task of the run; LeaseLost when it does not
    hold it (it expired and another run took it over, or it was released)."""
    lease = GcsLease(_gcs_root(root), owner, ttl_seconds, gcs_client)
    current = gcs.read(lease.uri, gcs_client)
    holder = Holder.parse(current.body.decode(errors="replace")) if current else None
    if current is None or holder is None or holder.owner != owner or holder.released:
        raise LeaseLost(f"run {owner} does not hold the run lease {lease.uri} "
                        f"({'no lease' if current is None else (holder or Holder()).describe()}"
                        f"{', released' if holder and holder.released else ''}): another run may be writing")
    lease.generation, lease.acquired, lease.nonce = current.generation, holder.acquired, holder.nonce
    lease.heartbeat()
    return lease


def release_for_run(root: str, owner: str, gcs_client=None) -> str:
    """Release the root's lease if run `owner` holds it, whatever its expiry; says what was done. Another
    run's lease is left alone (this run may have failed waiting for it)."""
    uri = lock_uri(_gcs_root(root))
    while True:
        current = gcs.read(uri, gcs_client)
        if current is None:
            return f"{uri}: no lease to release"
        holder = Holder.parse(current.body.decode(errors="replace")) or Holder()
        if holder.owner != owner:
            return f"{uri}: left alone, it is not this run's ({holder.describe()})"
        if holder.released:
            return f"{uri}: already released"
        body = dataclasses.replace(holder, released=True).body()
        if gcs.replace(uri, body, current.generation, gcs_client) is not None:
            return f"{uri}: released (run {owner})"
        # Written in between (this run's own last heartbeat, or a takeover): look again.


# ---------------------------------------------------------------- both


def default_owner() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def hold(root: str, wait_seconds: float, poll_seconds: float = 1.0, say: Callable[[str], None] = lambda _: None,
         owner: Optional[str] = None, ttl_seconds: float = DEFAULT_TTL_SECONDS, gcs_client=None) -> Iterator[None]:
    """Hold the root (local lock file or gs:// lease) for the duration; LeaseBusy after wait_seconds."""
    root = gcs.api_uri(root)
    if gcs.is_gcs(root):
        lease = GcsLease(root, owner or default_owner(), ttl_seconds, gcs_client)
        with lease.acquire(wait_seconds, poll_seconds, say).kept_alive():
            yield
    else:
        with local_lock(root, wait_seconds, poll_seconds, say):
            yield


def live_since(root: str, gcs_client=None, now: Optional[float] = None) -> Optional[float]:
    """When the run holding the root now took it (seconds since the epoch); None when no run holds it.

    A local lock whose holder is a dead process on this host is not live. A holder that cannot be read
    (being written) or names no start counts as holding since now: nothing of it may be taken for debris.
    """
    now = time.time() if now is None else now
    root = gcs.api_uri(root)
    if gcs.is_gcs(root):
        holder = read_gcs(root, gcs_client)
        if holder is None or not holder.live(now):
            return None
    else:
        holder = read_local(lock_uri(root))
        if holder is None or _stale_local(holder):
            return None
    return holder.acquired if holder.acquired is not None else now


def debris_cutoff(live_since: Optional[float], now: Optional[float] = None) -> float:
    """Another run's leftovers written before this time are debris: before the live holder took the root
    (its writer is gone), or, with no live holder, more than UNLEASED_GRACE_SECONDS ago."""
    if live_since is not None:
        return live_since
    return (time.time() if now is None else now) - UNLEASED_GRACE_SECONDS
