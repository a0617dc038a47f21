"""components/serving/rollout.py and components/serving/model_config.py: a push labels its version stable (direct) or
canary; promote
and rollback move the labels and delete nothing; every model config written parses with tensorflow-serving-api's
model_server_config_pb2; on GCS the config is replaced only under its generation."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from components import training_record
from components.errors import RolloutError, ServingConfigChanged
from components.serving import model_config, rollout, serving_dir
from components.serving.model_config import Labels

NAME = "penguin-tpu"


def _version(base: Path, number: int) -> None:
    (base / str(number)).mkdir(parents=True)
    (base / str(number) / serving_dir.SAVED_MODEL).write_text(f"graph {number}")


def _configs(base) -> dict[str, model_server_config_pb2.ModelServerConfig]:
    """Every model config beside the versions, parsed as TF Serving parses --model_config_file (a text proto)."""
    out = {}
    for name in (model_config.CONFIG_FILE, *model_config.TRACK_FILES.values()):
        out[name] = text_format.Parse((Path(base) / name).read_text(), model_server_config_pb2.ModelServerConfig())
    return out


def _served(config: model_server_config_pb2.ModelServerConfig) -> tuple[list[int], dict[str, int]]:
    [model] = config.model_config_list.config
    assert model.name == NAME and model.model_platform == "tensorflow"
    return list(model.model_version_policy.specific.versions), dict(model.version_labels)


def test_direct_pushes_serve_at_once_and_canary_pushes_wait_beside_stable(tmp_path):
    base = tmp_path / "serving"
    _version(base, 10)
    rollout.after_push(str(base), NAME, 10, "canary", "run-1")  # nothing stable yet: the first is stable
    assert rollout.labels(str(base)) == Labels(10)
    _version(base, 11)
    rollout.after_push(str(base), NAME, 11, "canary", "run-2")
    configs = _configs(base)
    assert _served(configs["models.config"]) == ([10, 11], {"stable": 10, "canary": 11})
    assert configs["models.config"].model_config_list.config[0].base_path == str(base)
    assert _served(configs["stable.config"]) == ([10], {})
    assert _served(configs["canary.config"]) == ([11], {})
    # "The model serving now" stays stable while the canary is out.
    assert serving_dir.serving(str(base)).number == 10 and serving_dir.canary(str(base)).number == 11
    assert training_record.serving_record(str(base))[0].number == 10

    _version(base, 12)
    rollout.after_push(str(base), NAME, 12, "canary", "run-3")  # replaces the canary; 11 stays on disk
    assert rollout.labels(str(base)) == Labels(10, 12)
    _version(base, 13)
    rollout.after_push(str(base), NAME, 13, "direct", "run-4")  # direct: stable at once, the canary dropped
    assert _served(_configs(base)["models.config"]) == ([13], {"stable": 13})
    assert _served(_configs(base)["canary.config"]) == ([13], {})
    assert [v.number for v in serving_dir.versions(str(base))] == [10, 11, 12, 13]


@pytest.mark.parametrize("move, labels", [("a canary replacing the one out", {"stable": 1, "canary": 3}),
                                          ("a direct push", {"stable": 3}),
                                          ("a rollback to a version not loaded", {"stable": 1})])
def test_a_label_moves_onto_a_version_only_once_the_servers_of_models_config_list_it(tmp_path, move, labels):
    """TF Serving applies the labels before it loads newly listed versions (tests/fake_tf_serving.py cites
    server_core.cc): written at once, such a move was refused on every poll and the version never loaded. Now the
    version is listed first, and the label moves after the servers' poll."""
    from tests.fake_tf_serving import ModelServer

    base = tmp_path / "serving"
    server = ModelServer(str(base))
    waits = []
    reload = rollout.Reload(30, wait=lambda seconds: (waits.append(seconds), server.poll()))
    for number in (1, 2):  # the first version, then a canary beside it: labels not in use yet, one write each
        _version(base, number)
        rollout.after_push(str(base), NAME, number, "canary", f"run-{number}", reload=reload)
        server.poll()
    assert (server.labels, waits) == ({"stable": 1, "canary": 2}, [])
    _version(base, 3)
    if move == "a canary replacing the one out":
        rollout.after_push(str(base), NAME, 3, "canary", "run-3", reload=reload)
    elif move == "a direct push":
        rollout.after_push(str(base), NAME, 3, "direct", "run-3", reload=reload)
    else:
        rollout.promote(str(base), NAME, "me", reload=reload)  # 2 was loaded: one write
        server.poll()
        assert (server.labels, server.states, waits) == ({"stable": 2}, {2: "available"}, [])
        rollout.rollback(str(base), NAME, "me", reload=reload)  # back to 1, unloaded since the promote
    server.poll()
    assert server.labels == labels and server.errors == [], server.errors
    assert waits == [30 + rollout.RELOAD_MARGIN_SECONDS]
    assert _served(_configs(base)["models.config"])[1] == labels
    assert server.serves("stable") == labels["stable"] and server.serves("canary") == labels.get("canary")


def test_the_model_server_stand_in_refuses_a_label_moved_onto_a_version_it_has_not_loaded(tmp_path):
    """The rule itself, on configs written as they were before: stable 1 -> 2 in one write is refused on every poll
    and 2 never starts loading. Without --allow_version_labels_for_unavailable_models even the first label is
    refused (why infra/serving sets the flag)."""
    from tests.fake_tf_serving import ModelServer

    base = tmp_path / "serving"
    for number in (1, 2):
        _version(base, number)
    server, strict = ModelServer(str(base)), ModelServer(str(base), allow_unavailable_labels=False)
    model_config.write(str(base), NAME, Labels(1), None)
    for each in (server, strict):
        each.poll()
        each.poll()
    assert (server.labels, server.serves("stable"), server.errors) == ({"stable": 1}, 1, [])
    assert strict.labels == {} and strict.states == {} and "version 1" in strict.errors[-1]
    model_config.write(str(base), NAME, Labels(2), model_config.read(str(base)))
    server.poll()
    server.poll()
    assert server.labels == {"stable": 1} and 2 not in server.states
    assert "Request to assign label to version 2 of model penguin-tpu, which is not currently available" \
        in server.errors[-1]


def test_promote_and_rollback_move_labels_delete_nothing_and_are_recorded(tmp_path):
    base = tmp_path / "serving"
    for number in (1, 2):
        _version(base, number)
        rollout.after_push(str(base), NAME, number, "canary", f"run-{number}")
    with pytest.raises(RolloutError, match="no stable version before 1"):
        rollout.rollback(str(base), NAME, "me")  # with the canary out: drops it ...
        rollout.rollback(str(base), NAME, "me")  # ... and then there is nothing before 1
    assert rollout.labels(str(base)) == Labels(1)
    with pytest.raises(RolloutError, match="no canary is out"):
        rollout.promote(str(base), NAME, "me")

    _version(base, 3)
    rollout.after_push(str(base), NAME, 3, "canary", "run-3")
    rollout.promote(str(base), NAME, "me")
    assert rollout.labels(str(base)) == Labels(3)
    assert _served(_configs(base)["models.config"]) == ([3], {"stable": 3})
    rollout.rollback(str(base), NAME, "me")  # no canary: the stable before 3
    assert rollout.labels(str(base)) == Labels(1)
    rollout.rollback(str(base), NAME, "me", to=2)
    assert rollout.labels(str(base)) == Labels(2)
    with pytest.raises(RolloutError, match="version 7 is not a loadable version"):
        rollout.rollback(str(base), NAME, "me", to=7)
    assert rollout.labels(str(base)) == Labels(2)  # a refused move changes nothing

    assert [v.number for v in serving_dir.versions(str(base))] == [1, 2, 3]
    moves = [(e.action, e.before_stable, e.before_canary, e.stable, e.canary) for e in rollout.events(str(base))]
    assert moves == [("push", None, None, 1, None), ("push", 1, None, 1, 2), ("rollback", 1, 2, 1, None),
                     ("push", 1, None, 1, 3), ("promote", 1, 3, 3, None), ("rollback", 3, None, 1, None),
                     ("rollback", 1, None, 2, None)]
    assert all(e.when.endswith("Z") and e.by for e in rollout.events(str(base)))


def test_a_root_without_a_model_config_serves_its_highest_version_as_stable_until_a_canary_push(tmp_path):
    base = tmp_path / "serving"
    _version(base, 5)
    _version(base, 6)
    assert rollout.labels(str(base)) == Labels(6) and serving_dir.serving(str(base)).number == 6
    assert serving_dir.canary(str(base)) is None
    _version(base, 7)  # the first push that writes a model config: 6 served until 7 appeared, so 6 stays stable
    rollout.after_push(str(base), NAME, 7, "canary", "run-7")
    assert rollout.labels(str(base)) == Labels(6, 7)


def test_a_config_changed_since_it_was_read_is_not_overwritten(tmp_path):
    base = tmp_path / "serving"
    _version(base, 1)
    _version(base, 2)
    rollout.after_push(str(base), NAME, 1, "direct", "run-1")
    stale = model_config.read(str(base))
    model_config.write(str(base), NAME, Labels(1, 2), stale)  # another writer
    with pytest.raises(ServingConfigChanged, match="changed since it was read"):
        model_config.write(str(base), NAME, Labels(2), stale)
    assert rollout.labels(str(base)) == Labels(1, 2)


def test_on_gcs_the_config_is_replaced_only_under_its_generation(gcs_bucket):
    base = f"{gcs_bucket.uri}/serving_model/{NAME}"
    bucket = gcs_bucket.client.bucket(gcs_bucket.name)
    for number in (1, 2):
        bucket.blob(f"serving_model/{NAME}/{number}/{serving_dir.SAVED_MODEL}").upload_from_string(b"graph")
    rollout.after_push(base, NAME, 1, "canary", "run-1", gcs_client=gcs_bucket.client)
    rollout.after_push(base, NAME, 2, "canary", "run-2", gcs_client=gcs_bucket.client)
    text = bucket.blob(f"serving_model/{NAME}/{model_config.CONFIG_FILE}").download_as_text()
    parsed = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
    assert _served(parsed) == ([1, 2], {"stable": 1, "canary": 2})
    assert parsed.model_config_list.config[0].base_path == base
    stale = model_config.read(base, gcs_bucket.client)
    rollout.promote(base, NAME, "me", gcs_client=gcs_bucket.client)
    with pytest.raises(ServingConfigChanged, match="generation"):
        model_config.write(base, NAME, Labels(1), stale, gcs_bucket.client)
    assert rollout.labels(base, gcs_bucket.client) == Labels(2)
    assert [e.action for e in rollout.events(base, gcs_bucket.client)] == ["push", "push", "promote"]


# -- "the model serving now" while a canary is out (docs/serving.md) --

def test_a_canary_push_leaves_stable_serving_and_a_candidate_identical_to_the_canary_is_not_pushed(tmp_path):
    from components.pusher import LABELS, UNCHANGED_LABEL, UNCHANGED_VERSION
    from components.serving import serving_gate, warmup
    from tests import serving_models

    settings = serving_gate.GateSettings(model_name=NAME, warmup_requests=2, rollout="canary")
    examples = serving_models.eval_split(tmp_path / "examples")
    base = tmp_path / "serving"
    first = serving_models.push(tmp_path, serving_models.save_model(tmp_path / "a", 0.5), examples, base, "a", settings)
    assert first.get_string_custom_property(LABELS) == f"stable {first.get_string_custom_property('pushed_version')}"
    model_b = serving_models.save_model(tmp_path / "b", 0.7)
    second = serving_models.push(tmp_path, model_b, examples, base, "b", settings)
    stable, canary = (int(p.get_string_custom_property("pushed_version")) for p in (first, second))
    assert rollout.labels(str(base)) == Labels(stable, canary)
    assert len(warmup.read(str(base / str(canary)))) == 2

    again = serving_models.push(tmp_path, model_b, examples, base, "b-again", settings)
    assert again.get_int_custom_property("pushed") == 0
    assert again.get_string_custom_property(UNCHANGED_VERSION) == str(canary)
    assert again.get_string_custom_property(UNCHANGED_LABEL) == "canary"
    assert rollout.labels(str(base)) == Labels(stable, canary)


def _record(base: Path, version: int, digest: str, key: str = "k") -> None:
    import json

    directory = base / training_record.RECORDS_DIR / str(version)
    directory.mkdir(parents=True)
    (directory / training_record.RECORD_FILE).write_text(json.dumps(
        {"version": str(version), "spans": [], "snapshot_digest": digest, "training_key": key}))


def test_nothing_new_compares_with_stable_and_never_retrains_what_the_canary_is(tmp_path):
    from components.data.snapshot import newness

    base = tmp_path / "serving"
    for number, digest in ((1, "a" * 64), (2, "b" * 64)):
        _version(base, number)
        _record(base, number, digest)
        rollout.after_push(str(base), NAME, number, "canary", "run")
    assert newness.check_flat("a" * 64, str(base), "k").new is False  # stable's data
    canary = newness.check_flat("b" * 64, str(base), "k")
    assert canary.new is False and "the canary (version 2) was trained on exactly this" in canary.why_not
    fresh = newness.check_flat("c" * 64, str(base), "k")
    assert fresh.new is True and fresh.serving_version == "1"  # new data is compared with stable
    rollout.promote(str(base), NAME, "me")
    assert newness.check_flat("a" * 64, str(base), "k").new is True  # 1 serves no more


def test_baseline_warm_start_and_drift_baseline_follow_stable_while_a_canary_is_out(tmp_path):
    from tfx.types import standard_artifacts

    from components.serving.serving_model import SERVING_DIR, SERVING_VERSION, ServingModelExecutor

    base = tmp_path / "serving"
    for number in (1, 2):
        _version(base, number)
        _record(base, number, str(number) * 64)
        rollout.after_push(str(base), NAME, number, "canary", "run")
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "serving-model")
    ServingModelExecutor().Do({}, {"model": [model]}, {SERVING_DIR: str(base)})
    # The Evaluator's baseline and the warm-start base (one artifact), and the drift gate's record: stable's.
    assert model.get_string_custom_property(SERVING_VERSION) == "1"
    assert (Path(model.uri) / "Format-Serving" / serving_dir.SAVED_MODEL).read_text() == "graph 1"
    assert training_record.serving_record(str(base))[1].snapshot_digest == "1" * 64
    assert training_record.serving_key(str(base)) == "version 1, record"


def test_the_serving_commands_show_promote_and_roll_back_leaving_a_valid_config_and_every_version(tmp_path, capsys):
    from pipeline.cli import main
    from tests.conftest import CONFIG

    root = tmp_path / "root"
    base = root / "serving_model" / NAME
    for number in (1, 2):
        _version(base, number)
        rollout.after_push(str(base), NAME, number, "canary", f"run-{number}")
    args = ["--config", str(CONFIG), "--set", f"pipeline.root={root}"]

    assert main(["serving", "status", *args]) == 0
    out = capsys.readouterr().out
    assert "stable: 1 (no training record" in out and "canary: 2 (no training record" in out
    assert "versions on disk: 1, 2" in out
    assert main(["serving", "promote", *args]) == 0
    assert _served(_configs(base)["models.config"]) == ([2], {"stable": 2})
    assert main(["serving", "rollback", *args]) == 0
    assert _served(_configs(base)["models.config"]) == ([1], {"stable": 1})
    assert main(["serving", "promote", *args]) == 1  # no canary out: a clear error, exit 1
    assert "no canary is out" in capsys.readouterr().err
    assert main(["serving", "promote", "--to", "2", *args]) == 2
    assert [v.number for v in serving_dir.versions(str(base))] == [1, 2]
    assert [e.action for e in rollout.events(str(base))] == ["push", "push", "promote", "rollback"]
    capsys.readouterr()
    assert main(["history", *args]) == 0  # no runs recorded here, but every label move
    moves = capsys.readouterr().out.split("label moves:\n", 1)[1].splitlines()
    assert [line.split()[1] for line in moves] == ["push", "push", "promote", "rollback"]
    assert "stable 1, canary 2 -> stable 2, canary -" in moves[2]


def test_the_model_config_servers_poll_reaches_the_pusher_and_the_runs_first_step():
    """serving.model_config_poll_seconds (30 in the cloud configs, 0 locally: no server reads a laptop's labels)."""
    from pipeline.config import load_config
    from pipeline.dag.canary import canary_check_step

    config = load_config("configs/vertex.yaml", ["serving.check.before_run=true"])
    assert config.serving.gate_settings("m", ()).model_config_poll_seconds == 30
    assert canary_check_step(config, run_lease=False).exec_properties["model_config_poll_seconds"] == 30
    assert load_config("configs/local.yaml").serving.model_config_poll_seconds == 0
