"""components/pusher.py's executor: a blessed candidate byte-identical to the serving version is not pushed,
and every version it publishes gets its training-data record first (components/training_record.py).

(The first plain rerun after a push reaches this check: its cached candidate is the model serving now,
components/serving/serving_model.py. So does a retrained, bit-identical model, e.g. with caching off.)"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from components import training_record
from components.data.snapshot.component import DatasetSnapshot
from components.pusher import (
    LEASE_ROOT,
    REMOVED_DEBRIS,
    SNAPSHOT_KEY,
    STATISTICS_KEY,
    UNCHANGED_VERSION,
    PushExecutor,
)
from components.serving import serving_dir
from pipeline.local.lock import run_lock


def _age(path: Path, seconds: float) -> None:
    """Make everything under path look written `seconds` ago (before a run that starts now)."""
    then = time.time() - seconds
    for p in [path, *path.rglob("*")]:
        os.utime(p, (then, then))


def _model_artifact(tmp_path: Path, name: str, content: str) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / name)
    serving = Path(model.uri) / "Format-Serving"
    (serving / "variables").mkdir(parents=True)
    (serving / "variables" / "variables.index").write_text(content)
    (serving / serving_dir.SAVED_MODEL).write_text(f"graph {content}")
    return model


def _push(tmp_path: Path, model: standard_artifacts.Model, base: Path, blessed: bool = True):
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", int(blessed))
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / f"pushed-{len(os.listdir(tmp_path))}")
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(
        base_directory=str(base)))
    PushExecutor().Do(
        {standard_component_specs.MODEL_KEY: [model], standard_component_specs.MODEL_BLESSING_KEY: [blessing]},
        {standard_component_specs.PUSHED_MODEL_KEY: [pushed]},
        {standard_component_specs.PUSH_DESTINATION_KEY: proto_utils.proto_to_json(destination)})
    return pushed


def test_identical_candidate_is_not_pushed_again_and_names_the_serving_version(tmp_path):
    base = tmp_path / "serving"
    first = _push(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base)
    assert first.get_int_custom_property("pushed") == 1
    [version] = serving_dir.versions(str(base))

    # Another artifact (a retrained model), byte-identical to the one serving.
    again = _model_artifact(tmp_path, "m2", "weights a")
    second = _push(tmp_path, again, base)
    assert second.get_int_custom_property("pushed") == 0
    assert second.get_string_custom_property(UNCHANGED_VERSION) == version.name
    assert sorted(os.listdir(base)) == sorted([version.name, serving_dir.CLAIMS_DIR])

    # Different bytes: a new version.
    shutil.rmtree(again.uri)
    third = _push(tmp_path, _model_artifact(tmp_path, "m3", "weights b"), base)
    assert third.get_int_custom_property("pushed") == 1
    assert len(serving_dir.versions(str(base))) == 2


def test_unblessed_candidate_is_not_pushed(tmp_path):
    base = tmp_path / "serving"
    pushed = _push(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base, blessed=False)
    assert pushed.get_int_custom_property("pushed") == 0
    assert not serving_dir.versions(str(base))


def _statistics(tmp_path: Path, tag: str = "a") -> standard_artifacts.ExampleStatistics:
    """A StatisticsGen-shaped artifact: one FeatureStats.pb per split."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    stats = standard_artifacts.ExampleStatistics()
    stats.uri = str(tmp_path / f"stats-{tag}")
    for split, rows in (("train", 100), ("eval", 50)):
        proto = statistics_pb2.DatasetFeatureStatisticsList(datasets=[
            statistics_pb2.DatasetFeatureStatistics(name=f"{tag}-{split}", num_examples=rows)])
        (Path(stats.uri) / f"Split-{split}").mkdir(parents=True)
        (Path(stats.uri) / f"Split-{split}" / training_record.STATISTICS_FILE).write_bytes(proto.SerializeToString())
    return stats


def _snapshot(spans: str = "span-1,span-2", digest: str = "d" * 64) -> DatasetSnapshot:
    snapshot = DatasetSnapshot()
    snapshot.set_string_custom_property("spans", spans)
    snapshot.set_string_custom_property("digest", digest)
    snapshot.set_int_custom_property("rows", 150)
    return snapshot


def _push_with_data(tmp_path, model, base, statistics, snapshot=None, lease_root=None, **exec_properties):
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / f"pushed-{len(os.listdir(tmp_path))}")
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(
        base_directory=str(base)))
    inputs = {standard_component_specs.MODEL_KEY: [model], standard_component_specs.MODEL_BLESSING_KEY: [blessing],
              STATISTICS_KEY: [statistics], **({SNAPSHOT_KEY: [snapshot]} if snapshot is not None else {})}
    PushExecutor().Do(inputs, {standard_component_specs.PUSHED_MODEL_KEY: [pushed]},
                      {standard_component_specs.PUSH_DESTINATION_KEY: proto_utils.proto_to_json(destination),
                       **({LEASE_ROOT: str(lease_root)} if lease_root else {}), **exec_properties})
    return pushed


def test_a_push_writes_the_training_data_record_beside_the_version(tmp_path):
    base = tmp_path / "serving"
    stats = _statistics(tmp_path)
    pushed = _push_with_data(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base, stats, _snapshot())
    [version] = serving_dir.versions(str(base))
    assert pushed.get_string_custom_property("pushed_version") == version.name
    # Beside the version, under a name TF Serving ignores; the version dir holds the model only.
    assert sorted(os.listdir(base)) == sorted([version.name, training_record.RECORDS_DIR, serving_dir.CLAIMS_DIR])
    assert sorted(os.listdir(version.path)) == sorted(["variables", serving_dir.SAVED_MODEL])
    record = training_record.read(str(base), version.name)
    assert record.spans == ("span-1", "span-2") and record.snapshot_digest == "d" * 64
    assert record.snapshot_rows == 150 and record.statistics_uri == stats.uri
    # The train split's statistics, byte for byte; the eval split is not the training data.
    assert Path(record.statistics_path).read_bytes() == \
        (Path(stats.uri) / "Split-train" / training_record.STATISTICS_FILE).read_bytes()
    assert record.train_statistics().datasets[0].name == "a-train"
    assert sorted(os.listdir(record.path)) == [training_record.TRAIN_SPLIT, training_record.RECORD_FILE]
    assert training_record.serving_key(str(base)) == f"version {version.name}, record"

    # The identical model again: nothing pushed, nothing written, the serving version keeps its record.
    before = {p: p.read_bytes() for p in (base / training_record.RECORDS_DIR).rglob("*") if p.is_file()}
    again = _push_with_data(tmp_path, _model_artifact(tmp_path, "m2", "weights a"), base,
                            _statistics(tmp_path, "b"), _snapshot("span-3", "e" * 64))
    assert again.get_int_custom_property("pushed") == 0
    assert os.listdir(base / training_record.RECORDS_DIR) == [version.name]
    assert {p: p.read_bytes() for p in (base / training_record.RECORDS_DIR).rglob("*") if p.is_file()} == before


def test_the_record_is_complete_before_the_version_is_visible_and_a_failed_push_leaves_neither(
        tmp_path, monkeypatch):
    base = tmp_path / "serving"
    publish = serving_dir.publish
    seen = {}

    def observed_publish(model_dir, base_dir, version, **kwargs):
        # The moment the version starts to appear: its record must already be there, whole.
        seen["record"] = training_record.read(base_dir, str(version))
        seen["versions"] = serving_dir.versions(base_dir)
        if "fail" in seen:
            raise OSError("push killed while copying")
        return publish(model_dir, base_dir, version, **kwargs)

    monkeypatch.setattr(serving_dir, "publish", observed_publish)
    _push_with_data(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base, _statistics(tmp_path))
    assert seen["versions"] == [] and seen["record"] is not None
    assert seen["record"].train_statistics().datasets[0].name == "a-train"
    [first] = serving_dir.versions(str(base))

    seen["fail"] = True
    with pytest.raises(OSError, match="push killed"):
        _push_with_data(tmp_path, _model_artifact(tmp_path, "m3", "weights b"), base, _statistics(tmp_path, "b"))
    assert seen["record"] is not None  # it was written before the version would have appeared ...
    assert serving_dir.versions(str(base)) == [first]  # ... which it never did,
    assert os.listdir(base / training_record.RECORDS_DIR) == [first.name]  # so it has no record either


def test_a_record_left_by_a_killed_push_is_removed_by_the_next_push(tmp_path):
    base, root = tmp_path / "serving", tmp_path / "root"
    _push_with_data(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base, _statistics(tmp_path))
    [first] = serving_dir.versions(str(base))
    # Killed between the record and the version (SIGKILL: no cleanup ran), before the next run began.
    training_record.write(str(base), 12345, statistics_uri=_statistics(tmp_path, "k").uri, model_uri="m")
    _age(base / training_record.RECORDS_DIR / "12345", 60)
    with run_lock(str(root), 0):
        pushed = _push_with_data(tmp_path, _model_artifact(tmp_path, "m2", "weights b"), base,
                                 _statistics(tmp_path, "c"), lease_root=root)
    assert pushed.get_string_custom_property(REMOVED_DEBRIS) == \
        "record of version 12345 (its version never appeared)"
    numbers = [v.name for v in serving_dir.versions(str(base))]
    assert sorted(os.listdir(base / training_record.RECORDS_DIR)) == sorted(numbers) and "12345" not in numbers
    assert training_record.read(str(base), numbers[-1]).train_statistics().datasets[0].name == "c-train"
    assert training_record.read(str(base), first.name).train_statistics().datasets[0].name == "a-train"


def test_two_pushes_in_the_same_second_claim_two_versions(tmp_path, monkeypatch):
    """Both pushes pick their number before either has published: the claim, not the pick, decides."""
    base = tmp_path / "serving"
    picked = threading.Barrier(2, timeout=30)
    pick = serving_dir.next_version

    def together(*args, **kwargs):
        number = pick(*args, **kwargs)
        picked.wait()  # both have picked (the same number) before either claims or publishes
        return number

    monkeypatch.setattr(serving_dir, "next_version", together)
    results, errors = {}, []

    def push(tag):
        try:
            results[tag] = _push_with_data(tmp_path, _model_artifact(tmp_path, f"m-{tag}", f"weights {tag}"),
                                           base, _statistics(tmp_path, tag))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=push, args=(tag,)) for tag in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    versions = {tag: pushed.get_string_custom_property("pushed_version") for tag, pushed in results.items()}
    assert len(set(versions.values())) == 2, versions
    assert [v.name for v in serving_dir.versions(str(base))] == sorted(versions.values())
    for tag, version in versions.items():
        assert (base / version / "variables" / "variables.index").read_text() == f"weights {tag}"
        assert training_record.read(str(base), version).train_statistics().datasets[0].name == f"{tag}-train"
