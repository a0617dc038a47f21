"""The run lease of a run on Vertex or Kubeflow (components/coordination/run_lease.py,
components/coordination/lease.py), against the real
fake-gcs-server: taken by the run's first task, renewed by its Pusher, released only by its own exit handler;
and the bucket mount that sends these objects to GCS while everything else stays a file (components/gcs.py)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from components import gcs
from components.coordination import lease
from components.pusher import LEASE_OWNER, LEASE_TTL
from components.serving import serving_dir
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
    from components.coordination.run_lease import OWNER_PLACEHOLDER, RunLease

    with pytest.raises(ValueError, match="placeholder"):
        RunLease.EXECUTOR_SPEC.executor_class().Do(
            {}, {}, {"root": "gs://b/r", "owner": OWNER_PLACEHOLDER, "wait_seconds": 0.0, "ttl_seconds": 1.0,
                     "backend": "vertex"})


VERTEX_JOB = "projects/my-gcp-project/locations/us-central1/pipelineJobs/{}"


def test_a_cancelled_vertex_run_holding_the_lease_never_blocks_the_next_run(gcs_bucket):
    """Its exit handler did not run (a cancel): the next run asks Vertex AI (the real aiplatform client against
    tests/fake_vertex.py) and takes the lease over at once; while the holder runs, or when Vertex can't answer,
    the next run waits and fails naming it (fail closed)."""
    from components.coordination.job_state import VertexJobs
    from tests.fake_vertex import FakeVertex

    root, client = _root(gcs_bucket), gcs_bucket.client
    fake = FakeVertex(job_states=["PIPELINE_STATE_RUNNING"])
    url = fake.start()
    try:
        fake.jobs["run-1"] = {"name": VERTEX_JOB.format("run-1"), "state": "PIPELINE_STATE_RUNNING", "_polls": 0}
        lease.take_for_run(root, VERTEX_JOB.format("run-1"), 0, 86400, gcs_client=client)
        jobs = VertexJobs(url)
        with pytest.raises(lease.LeaseBusy, match="run-1.*its run is over"):
            lease.take_for_run(root, VERTEX_JOB.format("run-2"), 0.2, 86400, poll_seconds=0.05, gcs_client=client,
                               jobs=jobs)
        assert fake.sent("GET", r"/pipelineJobs/run-1$")
        fake.job_states = ["PIPELINE_STATE_CANCELLED"]
        with pytest.raises(lease.LeaseBusy):  # Vertex cannot be reached: treated as running
            lease.take_for_run(root, VERTEX_JOB.format("run-2"), 0.2, 86400, poll_seconds=0.05, gcs_client=client,
                               jobs=VertexJobs("http://127.0.0.1:9"))
        said = []
        held = lease.take_for_run(root, VERTEX_JOB.format("run-2"), 600, 86400, gcs_client=client, jobs=jobs,
                                  say=said.append)
        assert held.taken_over.owner == VERTEX_JOB.format("run-1") and held.holder_ended == "PIPELINE_STATE_CANCELLED"
        assert any("its run is over (PIPELINE_STATE_CANCELLED)" in s for s in said), said
        assert lease.read_gcs(root, client).owner == VERTEX_JOB.format("run-2")
        # Should the cancelled run's exit handler run after all, it leaves the new holder's lease alone.
        assert "left alone" in lease.release_for_run(root, VERTEX_JOB.format("run-1"), client)
    finally:
        fake.stop()


def test_a_cancelled_kubeflow_run_holding_the_lease_never_blocks_the_next_run(gcs_bucket, tmp_path):
    """The same on Kubeflow Pipelines: the run id the lease recorded, asked of the KFP API (the real
    kfp_server_api client against tests/fake_kfp.py) with the pod's token."""
    from components.coordination.job_state import KubeflowRuns
    from tests.fake_kfp import FakeKfp

    root, client = _root(gcs_bucket), gcs_bucket.client
    fake = FakeKfp(token="pod-token", run_states=["RUNNING"])
    url = fake.start()
    try:
        fake.runs["uuid-1"] = {"run_id": "uuid-1", "display_name": "penguin-tpu-1"}
        lease.take_for_run(root, "penguin-tpu-abc12", 0, 86400, gcs_client=client, run_id="uuid-1")
        (tmp_path / "token").write_text("pod-token\n")
        jobs = KubeflowRuns(url, str(tmp_path / "token"))
        with pytest.raises(lease.LeaseBusy):
            lease.take_for_run(root, "penguin-tpu-def34", 0.2, 86400, poll_seconds=0.05, gcs_client=client,
                               run_id="uuid-2", jobs=jobs)
        fake.run_states = ["CANCELED"]
        held = lease.take_for_run(root, "penguin-tpu-def34", 600, 86400, gcs_client=client, run_id="uuid-2",
                                  jobs=jobs)
        assert held.holder_ended == "CANCELED" and lease.read_gcs(root, client).run_id == "uuid-2"
        assert {r.headers.get("authorization") for r in fake.sent("GET", "/runs/uuid-1$")} == {"Bearer pod-token"}
    finally:
        fake.stop()


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


def test_objects_outlive_the_emulator_as_a_bucket_keeps_them_between_dry_runs(tmp_path, monkeypatch):
    """TF Serving's models.config and the claims are written under generation preconditions: the next dry run on
    the directory must find them, at the same generation, and still be refused a stale write."""
    uri = "gs://bucket-a/root/serving/models.config"
    with gcs_emulator.shared(tmp_path, ["bucket-a"]) as env:
        monkeypatch.setenv(gcs_emulator.EMULATOR_ENV, env[gcs_emulator.EMULATOR_ENV])
        first = gcs.create(uri, b"one")
        second = gcs.replace(uri, b"two", first)
        info = json.loads((tmp_path / "gcs-emulator" / "server.json").read_text())
    assert not gcs_emulator._is_server(info["pid"], info["port"])  # the first server is gone
    with gcs_emulator.shared(tmp_path, ["bucket-a"]) as env:
        assert env[gcs_emulator.EMULATOR_ENV] != info["url"]
        monkeypatch.setenv(gcs_emulator.EMULATOR_ENV, env[gcs_emulator.EMULATOR_ENV])
        kept = gcs.read(uri)
        assert (kept.generation, kept.body) == (second, b"two")
        assert gcs.replace(uri, b"stale", first) is None and gcs.create(uri, b"again") is None
        assert gcs.replace(uri, b"three", second) is not None


def test_a_dry_run_that_cannot_reach_the_emulator_another_run_uses_refuses_to_start_a_second(tmp_path):
    """Fail closed: two emulators on one directory would each hold "the" run lease, and both runs would push."""
    import fcntl

    from pipeline.errors import EmulatorError

    state = tmp_path / "gcs-emulator"
    state.mkdir()
    # Another dry run uses an emulator this one cannot reach (say, in another network namespace).
    (state / "server.json").write_text(json.dumps({"pid": 1, "port": 9, "url": "http://127.0.0.1:9"}))
    other = open(state / "users", "a")
    fcntl.flock(other, fcntl.LOCK_SH)
    try:
        with pytest.raises(EmulatorError, match="another dry run on .* uses the GCS emulator at http://127.0.0.1:9"):
            with gcs_emulator.shared(tmp_path, ["bucket-a"]):
                pass
        assert json.loads((state / "server.json").read_text())["url"] == "http://127.0.0.1:9"  # left as it is
    finally:
        other.close()
    # Once nobody uses it, the stale record is replaced by a new emulator.
    with gcs_emulator.shared(tmp_path, ["bucket-a"]) as env:
        assert env[gcs_emulator.EMULATOR_ENV] != "http://127.0.0.1:9" and gcs_emulator._answers(
            env[gcs_emulator.EMULATOR_ENV])
