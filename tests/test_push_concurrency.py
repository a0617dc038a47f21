"""Pushes that can't collide or leave debris (components/serving/serving_dir.py, training_record.py), on a local
serving directory and on gs:// against the real fake-gcs-server (whose preconditions
tests/test_gcs_preconditions.py pins).

A push claims its version, then writes `.staging-<v>-<nonce>/`, `.training-data/<v>/` and finally `<v>/`.
Another run's push in progress must survive a concurrent clean-up; a killed push's leftovers must not
survive the next run's push.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from components import training_record
from components.coordination import lease
from components.serving import serving_dir
from pipeline.config import load_config
from pipeline.local.lock import run_lock
from pipeline.runs.history import Row, format_history
from pipeline.runs.summary import RunSummary, format_summary
from tests.test_pusher import _statistics


@dataclasses.dataclass
class Place:
    """A serving directory and its pipeline root, local or gs://, with raw access for setting scenes."""

    root: str
    client: Optional[object]  # google-cloud-storage client (gs://), None locally

    @property
    def base(self) -> str:
        return f"{self.root}/serving_model/m"

    def _split(self, rel: str) -> tuple[str, str]:
        bucket, _, prefix = self.base[len("gs://"):].partition("/")
        return bucket, f"{prefix}/{rel}"

    def write(self, rel: str, body: bytes) -> None:
        if self.client is None:
            path = Path(self.base) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
        else:
            bucket, name = self._split(rel)
            self.client.bucket(bucket).blob(name).upload_from_string(body)

    def files(self) -> dict[str, bytes]:
        """Every file under the serving directory and its bytes."""
        if self.client is None:
            base = Path(self.base)
            return {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*") if p.is_file()}
        bucket, prefix = self._split("")
        return {b.name[len(prefix):]: b.download_as_bytes()
                for b in self.client.list_blobs(bucket, prefix=prefix)}

    def hold(self, owner: str):
        """This run's lease on the root (the local lock file, or the gs:// lease object)."""
        return run_lock(self.root, 0, owner=owner, gcs_client=self.client)


@pytest.fixture(params=["local", "gcs"])
def place(request, tmp_path) -> Place:
    if request.param == "local":
        return Place(str(tmp_path / "root"), None)
    bucket = request.getfixturevalue("gcs_bucket")
    return Place(f"{bucket.uri}/root", bucket.client)


def _model(tmp_path: Path, tag: str) -> str:
    model = tmp_path / f"model-{tag}"
    (model / "variables").mkdir(parents=True)
    (model / "variables" / "variables.index").write_text(f"index {tag}")
    (model / serving_dir.SAVED_MODEL).write_text(f"graph {tag}")
    return str(model)


def _push_started(place: Place, tmp_path: Path, run: str, tag: str, partial: bool = True) -> tuple[int, str]:
    """A push of `run` stopped midway through making its version visible: claim, record, staging and, with
    `partial`, a version directory with everything but saved_model.pb (on GCS, which copies it last; locally
    what TFX's own Pusher or a rename-less copy leaves). Returns (version, staging)."""
    version = serving_dir.claim_version(place.base, run, gcs_client=place.client)
    training_record.write(place.base, version, _statistics(tmp_path, tag).uri, model_uri="m", gcs_client=place.client)
    staging = f"{serving_dir.STAGING_PREFIX}{version}-{tag}"
    for rel, body in (("variables/variables.index", f"index {tag}"), (serving_dir.SAVED_MODEL, f"graph {tag}")):
        place.write(f"{staging}/{rel}", body.encode())
    if partial:
        place.write(f"{version}/variables/variables.index", f"index {tag}".encode())
    return version, staging


def test_pushes_picking_the_same_number_claim_different_versions(place):
    now = time.time()
    claimed, start = {}, threading.Barrier(6, timeout=30)

    def claim(run):
        start.wait()
        claimed[run] = serving_dir.claim_version(place.base, run, now=now, gcs_client=place.client)

    threads = [threading.Thread(target=claim, args=(f"run-{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(claimed.values())) == 6, claimed
    held = serving_dir.claims(place.base, place.client)
    assert {c.owner: c.version for c in held.values()} == claimed


def test_a_cleanup_during_another_runs_push_leaves_that_push_whole(place, tmp_path):
    with place.hold("run-a"):  # run A holds the root and is pushing
        # Locally the version appears by one rename: no partial version directory, ever.
        version, staging = _push_started(place, tmp_path, "run-a", "a", partial=place.client is not None)
        before = place.files()
        # Run B (started by a schedule that took no lease, or a person) pushes meanwhile and cleans up,
        # with the lease it can see (A's) and without one.
        since = lease.live_since(place.root, place.client)
        assert since is not None
        for live in (since, None):
            removed = (serving_dir.clear_debris(place.base, "run-b", live, gcs_client=place.client)
                       + training_record.prune(place.base, "run-b", live, gcs_client=place.client))
            assert removed == []
        assert place.files() == before
        # A's push goes on and completes: whole, with its record.
        serving_dir.storage_for(place.base, place.client).publish(staging, str(version), serving_dir.SAVED_MODEL)
    assert [v.number for v in serving_dir.versions(place.base, place.client)] == [version]
    assert training_record.read(place.base, str(version), place.client) is not None


def test_a_killed_push_is_cleared_by_the_next_push_which_says_so(place, tmp_path):
    killed, staging = _push_started(place, tmp_path, "run-killed", "k")  # SIGKILL: nothing more ran
    assert serving_dir.incomplete(place.base, place.client) == [killed]
    time.sleep(0.01)
    with place.hold("run-next"):
        since = lease.live_since(place.root, place.client)
        removed = (serving_dir.clear_debris(place.base, "run-next", since, gcs_client=place.client)
                   + training_record.prune(place.base, "run-next", since, gcs_client=place.client))
        assert sorted(removed) == sorted([
            f"staging {staging}",
            f"unfinished version {killed} (no {serving_dir.SAVED_MODEL}: a killed push)",
            f"record of version {killed} (its version never appeared)"])
        version = serving_dir.claim_version(place.base, "run-next", gcs_client=place.client)
        serving_dir.publish(_model(tmp_path, "n"), place.base, version, gcs_client=place.client)
    assert version > killed
    assert serving_dir.incomplete(place.base, place.client) == []
    assert [v.number for v in serving_dir.versions(place.base, place.client)] == [version]
    leftovers = {rel.split("/")[0] for rel in place.files()}
    assert leftovers == {str(version), serving_dir.CLAIMS_DIR}, leftovers


def test_without_a_lease_another_runs_debris_is_kept_until_the_grace_has_passed(place, tmp_path):
    killed, _ = _push_started(place, tmp_path, "run-killed", "k")
    assert serving_dir.clear_debris(place.base, "run-next", None, gcs_client=place.client) == []
    later = time.time() + lease.UNLEASED_GRACE_SECONDS + 1
    removed = serving_dir.clear_debris(place.base, "run-next", None, gcs_client=place.client, now=later)
    assert len(removed) == 2 and serving_dir.incomplete(place.base, place.client) == []


def test_a_runs_own_leftovers_are_its_to_remove(place, tmp_path):
    """A retried push of the same run (its first attempt died) clears its first attempt at once."""
    with place.hold("run-a"):
        version, _ = _push_started(place, tmp_path, "run-a", "a")
        since = lease.live_since(place.root, place.client)
        assert len(serving_dir.clear_debris(place.base, "run-a", since, gcs_client=place.client)) == 2
        assert training_record.prune(place.base, "run-a", since, gcs_client=place.client) == [
            f"record of version {version} (its version never appeared)"]


def test_gs_publish_writes_saved_model_last_and_the_version_loads_only_then(gcs_bucket, tmp_path):
    base = f"{gcs_bucket.uri}/serving"
    model = _model(tmp_path, "g")
    path = serving_dir.publish(model, base, 7, gcs_client=gcs_bucket.client)
    assert path == f"{base}/7"
    assert serving_dir.tree_digest(path, gcs_client=gcs_bucket.client) == serving_dir.tree_digest(model)
    blobs = sorted(gcs_bucket.client.list_blobs(gcs_bucket.name, prefix="serving/7/"), key=lambda b: b.generation)
    assert blobs[-1].name.endswith(serving_dir.SAVED_MODEL)  # written last
    with pytest.raises(FileExistsError):
        serving_dir.publish(model, base, 7, gcs_client=gcs_bucket.client)
    assert not [b.name for b in gcs_bucket.client.list_blobs(gcs_bucket.name, prefix="serving/.staging")]


def test_history_and_the_run_summary_show_what_a_push_removed():
    what = "unfinished version 16 (no saved_model.pb: a killed push)"
    row = Row(run_id="run-next", spans="span-1", rows=10, drift="ok", metric=0.9, blessed=True,
              pushed_version="17", unchanged_version=None, stopped_by=None, removed_debris=(what,))
    assert f"removed what a killed push left: {what}" in format_history([row])
    summary = RunSummary(run_id="run-next", components=[], metrics={}, baseline_metrics={}, blessed=True,
                         validation_failures=[], pushed_path="/s/17", pushed_version="17", removed_debris=(what,))
    assert f"removed what a killed push left: {what}" in format_summary(summary, load_config(None, []))


def test_the_pusher_on_a_gs_root_clears_a_killed_push_and_publishes(gcs_bucket, gcs_emulator, tmp_path,
                                                                     monkeypatch):
    from tests.test_pusher import _model_artifact, _push_with_data

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)  # the executor's own default client
    place = Place(f"{gcs_bucket.uri}/root", gcs_bucket.client)
    killed, _ = _push_started(place, tmp_path, "run-killed", "k")
    time.sleep(0.01)
    with place.hold("run-next"):
        pushed = _push_with_data(tmp_path, _model_artifact(tmp_path, "m", "weights n"), place.base,
                                 _statistics(tmp_path, "n"), lease_root=place.root)
    version = pushed.get_string_custom_property("pushed_version")
    assert [v.name for v in serving_dir.versions(place.base, place.client)] == [version]
    assert f"unfinished version {killed}" in pushed.get_string_custom_property("removed_debris")
    assert training_record.read(place.base, version, place.client).statistics_uri.endswith("stats-n")
