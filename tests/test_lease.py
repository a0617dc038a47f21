"""The run lease on a gs:// root (components/coordination/lease.py), against the real fake-gcs-server.

The emulator honours the precondition forms the lease uses (tests/test_gcs_preconditions.py),
so a lease that loses its mutual exclusion fails here.
"""

from __future__ import annotations

import logging
import threading

import pytest

from components import gcs
from components.coordination import lease
from pipeline.errors import RunLocked
from pipeline.local.lock import run_lock


class Clock:
    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _all_at_once(leases: list) -> dict:
    """{owner: try_acquire()'s answer} of leases trying at the same moment, one thread each."""
    start, results = threading.Barrier(len(leases), timeout=30), {}

    def go(one):
        start.wait()
        results[one.owner] = one.try_acquire()

    threads = [threading.Thread(target=go, args=(one,)) for one in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _root(bucket, name: str = "team/root") -> str:
    return f"{bucket.uri}/{name}"


def test_two_holders_the_second_waits_then_refuses_naming_the_first_then_gets_it(gcs_bucket):
    root = _root(gcs_bucket)
    first = lease.GcsLease(root, "run-first", gcs_client=gcs_bucket.client).acquire(0)
    second = lease.GcsLease(root, "run-second", gcs_client=gcs_bucket.client)
    said = []
    with pytest.raises(lease.LeaseBusy, match=r"run run-first.*waited 0.2 s \(pipeline.lock_wait_seconds\)"):
        second.acquire(0.2, poll_seconds=0.05, say=said.append)
    assert said and "run-first" in said[0]
    # Through the CLI's lock: RunLocked (exit 5), naming the holder.
    with pytest.raises(RunLocked, match="run-first"):
        with run_lock(root, 0, owner="run-third", gcs_client=gcs_bucket.client):
            pass
    assert lease.read_gcs(root, gcs_bucket.client).owner == "run-first"
    assert first.release()
    second.acquire(0)
    assert lease.read_gcs(root, gcs_bucket.client).owner == "run-second"
    assert second.taken_over is None  # a released lease is taken without a takeover


def test_of_many_runs_starting_together_exactly_one_gets_the_lease(gcs_bucket):
    root = _root(gcs_bucket)
    leases = [lease.GcsLease(root, f"run-{i}", gcs_client=gcs_bucket.client) for i in range(8)]
    results = _all_at_once(leases)
    winners = [owner for owner, holder in results.items() if holder is None]
    assert len(winners) == 1, results
    assert lease.read_gcs(root, gcs_bucket.client).owner == winners[0]
    assert {h.owner for h in results.values() if h is not None} == {winners[0]}


def test_a_stale_lease_is_taken_over_and_logged_and_its_old_owner_can_neither_beat_nor_release(
        gcs_bucket, caplog):
    root, clock = _root(gcs_bucket), Clock()
    dead = lease.GcsLease(root, "run-killed", ttl_seconds=60, gcs_client=gcs_bucket.client, clock=clock).acquire(0)
    clock.t += 30
    alive = lease.GcsLease(root, "run-next", ttl_seconds=60, gcs_client=gcs_bucket.client, clock=clock)
    assert alive.try_acquire() is not None  # not stale yet: 30 s of 60
    clock.t += 31
    said = []
    with caplog.at_level(logging.WARNING, logger="components.coordination.lease"):
        alive.acquire(0, say=said.append)
    assert alive.taken_over is not None and alive.taken_over.owner == "run-killed"
    assert any("took over the run lease" in r.message and "run-killed" in r.message and "it expired" in r.message
               for r in caplog.records)
    assert any("run-killed" in m for m in said)
    # The old owner comes back (it was only paused): it has lost the lease and learns so.
    with pytest.raises(lease.LeaseLost):
        dead.heartbeat()
    assert not dead.release()
    assert lease.read_gcs(root, gcs_bucket.client).owner == "run-next"
    assert lease.live_since(root, gcs_bucket.client, now=clock.t) == alive.acquired


def test_two_runs_taking_over_one_stale_lease_together_one_wins(gcs_bucket):
    root, clock = _root(gcs_bucket), Clock()
    lease.GcsLease(root, "run-killed", ttl_seconds=10, gcs_client=gcs_bucket.client, clock=clock).acquire(0)
    clock.t += 11
    takers = [lease.GcsLease(root, f"run-{i}", ttl_seconds=10, gcs_client=gcs_bucket.client, clock=clock)
              for i in range(6)]
    results = _all_at_once(takers)
    winners = [owner for owner, holder in results.items() if holder is None]
    assert len(winners) == 1, results
    assert lease.read_gcs(root, gcs_bucket.client).owner == winners[0]


def test_a_held_lease_is_kept_alive_past_its_ttl_and_released_at_the_end_even_on_failure(gcs_bucket):
    root = _root(gcs_bucket)
    holder = lease.GcsLease(root, "run-long", ttl_seconds=0.6, gcs_client=gcs_bucket.client)
    other = lease.GcsLease(root, "run-other", ttl_seconds=0.6, gcs_client=gcs_bucket.client)
    with pytest.raises(RuntimeError, match="a task failed"):
        with holder.acquire(0).kept_alive():
            generations = set()
            for _ in range(8):  # 1.6 s: well past the ttl, so only heartbeats keep it
                threading.Event().wait(0.2)
                assert other.try_acquire() is not None
                generations.add(gcs.read(lease.lock_uri(root), gcs_bucket.client).generation)
            assert len(generations) > 1  # it was rewritten: the heartbeats
            raise RuntimeError("a task failed")
    assert lease.read_gcs(root, gcs_bucket.client).released
    assert lease.live_since(root, gcs_bucket.client) is None
    assert other.try_acquire() is None and other.taken_over is None


def test_live_since(gcs_bucket, tmp_path):
    root, clock = _root(gcs_bucket), Clock()
    assert lease.live_since(root, gcs_bucket.client) is None
    held = lease.GcsLease(root, "run-a", ttl_seconds=60, gcs_client=gcs_bucket.client, clock=clock).acquire(0)
    assert lease.live_since(root, gcs_bucket.client, now=clock.t + 1) == held.acquired == clock.t
    assert lease.live_since(root, gcs_bucket.client, now=clock.t + 61) is None  # expired
    # A local root: the lock file's holder, while it runs.
    assert lease.live_since(str(tmp_path)) is None
    with run_lock(str(tmp_path), 0):
        since = lease.live_since(str(tmp_path))
        assert since is not None and abs(since - lease.read_local(lease.lock_uri(str(tmp_path))).acquired) < 1e-6
    assert lease.live_since(str(tmp_path)) is None
