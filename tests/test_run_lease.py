"""The run lease of a run on Vertex or Kubeflow (components/run_lease.py, components/lease.py), against the real
fake-gcs-server: taken by the run's first task, renewed by its Pusher, released only by its own exit handler;
and the bucket mount that sends these objects to GCS while everything else stays a file (components/gcs.py)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from components import gcs, lease, serving_dir
from components.pusher import LEASE_OWNER, LEASE_TTL
from pipeline.dryrun import gcs_emulator


def _root(bucket) -> str:
    return f"{bucket.uri}/root"


def test_a_run_holds_the_lease_from_its_first_task_until_its_own_exit_handler_releases_it(gcs_bucket):
    root, client = _root(gcs_bucket), gcs_bucket.client
    lease.take_for_run(root, "run-a", 0, 600, gcs_client=client)
    # The first task of a second run waits, then fails naming the holder (RunLease: the task fails).
    with pytest.raises(lease.LeaseBusy, match=r"run run-a.*waited 0.2 s"):
        lease.take_for_run(root, "run-b", 0.2, 600, poll_seconds=0.05, gcs_client=client)
    # That run's exit handler leaves the other run's lease alone.
    assert "left alone" in lease.release_for_run(root, "run-b", client)
    assert lease.read_gcs(root, client).owner == "run-a"
    assert lease.live_since(root, client) is not None
    # A retried first task of the same run adopts its lease.
    lease.take_for_run(root, "run-a", 0, 600, gcs_client=client)
    assert "released (run run-a)" in lease.release_for_run(root, "run-a", client)
    assert "already released" in lease.release_for_run(root, "run-a", client)
    assert lease.live_since(root, client) is None
    lease.take_for_run(root, "run-b", 0, 600, gcs_client=client)
    assert lease.read_gcs(root, client).owner == "run-b"


def test_an_unreplaced_owner_placeholder_is_refused():
    from components.run_lease import OWNER_PLACEHOLDER, RunLease

    with pytest.raises(ValueError, match="placeholder"):
        RunLease.EXECUTOR_SPEC.executor_class().Do(
            {}, {}, {"root": "gs://b/r", "owner": OWNER_PLACEHOLDER, "wait_seconds": 0.0, "ttl_seconds": 1.0})


def _expired_lease_of(root: str, owner: str, client) -> None:
    stale = lease.GcsLease(root, owner, ttl_seconds=1, gcs_client=client, clock=lambda: 1_000_000_000.0)
    stale.acquire(0)


def test_a_run_whose_lease_was_taken_over_cannot_adopt_it(gcs_bucket):
    root, client = _root(gcs_bucket), gcs_bucket.client
    _expired_lease_of(root, "run-slow", client)  # a run that outlived pipeline.run_lease_ttl_seconds
    lease.take_for_run(root, "run-next", 0, 600, gcs_client=client)  # takes the stale lease over
    with pytest.raises(lease.LeaseLost, match="run run-slow does not hold.*run run-next"):
        lease.adopt(root, "run-slow", 600, client)
    held = lease.adopt(root, "run-next", 600, client)
    assert held.generation is not None
    # The slow run's exit handler leaves the new holder's lease alone.
    assert "left alone" in lease.release_for_run(root, "run-slow", client)


def test_the_pusher_of_a_run_renews_its_lease_and_refuses_to_push_when_the_run_lost_it(
        gcs_bucket, gcs_emulator, tmp_path, monkeypatch):
    from tests.test_pusher import _model_artifact, _push_with_data, _statistics

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)  # the executor's own default client
    root, client = _root(gcs_bucket), gcs_bucket.client
    base = f"{root}/serving"
    _expired_lease_of(root, "run-slow", client)
    lease.take_for_run(root, "run-next", 0, 600, gcs_client=client)
    with pytest.raises(lease.LeaseLost):
        _push_with_data(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base, _statistics(tmp_path, "a"),
                        lease_root=root, **{LEASE_OWNER: "run-slow", LEASE_TTL: 600.0})
    assert serving_dir.versions(base, client) == [] and serving_dir.claims(base, client) == {}
    before = lease.read_gcs(root, client).expires
    pushed = _push_with_data(tmp_path, _model_artifact(tmp_path, "m2", "weights b"), base,
                             _statistics(tmp_path, "b"), lease_root=root, **{LEASE_OWNER: "run-next", LEASE_TTL: 900.0})
    version = int(pushed.get_string_custom_property("pushed_version"))
    assert serving_dir.claims(base, client)[version].owner == "run-next"
    after = lease.read_gcs(root, client)
    assert after.owner == "run-next" and not after.released and after.expires > before  # renewed, still held


def test_under_a_declared_bucket_mount_the_lease_and_claims_go_to_gcs_and_the_rest_stays_local(
        gcs_bucket, gcs_emulator, tmp_path, monkeypatch):
    mount = tmp_path / "gcs"
    monkeypatch.setenv(gcs.MOUNT_ENV, str(mount))
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    assert gcs.api_uri(f"{mount}/b/x/y") == "gs://b/x/y" and gcs.api_uri(f"{mount}/b") == "gs://b"
    assert gcs.api_uri(str(mount)) == str(mount) and gcs.api_uri(str(tmp_path / "elsewhere")) == str(
        tmp_path / "elsewhere")
    assert gcs.api_uri("gs://b/x") == "gs://b/x" and gcs.api_uri("relative/x") == "relative/x"
    local_root = mount / gcs_bucket.name / "root"
    with lease.hold(str(local_root), 0, owner="run-mounted", gcs_client=gcs_bucket.client):
        assert lease.read_gcs(_root(gcs_bucket), gcs_bucket.client).owner == "run-mounted"
        assert not (local_root / lease.LOCK_FILE).exists()
    base = local_root / "serving"
    version = serving_dir.claim_version(str(base), "run-mounted")
    assert gcs_bucket.client.bucket(gcs_bucket.name).get_blob(f"root/serving/.claims/{version}.json") is not None
    assert not (base / serving_dir.CLAIMS_DIR).exists()
    assert list(serving_dir.claims(str(base))) == [version]


def test_dry_runs_on_one_directory_share_one_emulator_and_the_last_one_stops_it(tmp_path):
    with gcs_emulator.shared(tmp_path, ["bucket-a"]) as first:
        with gcs_emulator.shared(tmp_path, ["bucket-b"]) as second:
            assert first == second and first[gcs.MOUNT_ENV] == str(tmp_path / "gcs")
        url = first[gcs_emulator.EMULATOR_ENV]
        with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=5) as resp:  # still up for the first
            assert {b["name"] for b in json.load(resp)["items"]} == {"bucket-a", "bucket-b"}
        info = json.loads((tmp_path / "gcs-emulator" / "server.json").read_text())
    assert not (tmp_path / "gcs-emulator" / "server.json").exists()
    assert not gcs_emulator._is_server(info["pid"], info["port"]) and not gcs_emulator._answers(url)
