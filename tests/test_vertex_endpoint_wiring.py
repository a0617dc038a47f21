"""serving.target vertex_endpoint wired in: the config section, the Pusher deploying each pushed version, and
`python -m pipeline serving status|promote|rollback` moving the endpoint with the TF Serving labels in step. Against
the loopback stand-in (pipeline/dryrun/vertex_endpoints.py) through the real google-cloud-aiplatform client."""

from __future__ import annotations

import time

import pytest

from components.serving import rollout
from components.serving import vertex_endpoint as ve
from components.serving.model_config import Labels
from pipeline.config import load_config
from pipeline.dryrun.vertex_endpoints import VertexEndpoints
from pipeline.errors import ConfigError
from tests.conftest import CONFIG

ENDPOINT = "projects/my-project/locations/us-central1/endpoints/42"
NAME = "penguin-tpu"


@pytest.fixture
def fake():
    f = VertexEndpoints()
    f.add_endpoint(ENDPOINT)
    f.url = f.start()
    yield f
    f.stop()


def _uploaded(target, number):
    """A registry version of serving dir version `number`, uploaded from where Vertex reads it (Cloud Storage)."""
    return ve.upload_version(target, f"gs://my-bucket/serving/{number}", number)


def _sets(root, fake_url, *extra):
    return [f"pipeline.root={root}", "serving.target=vertex_endpoint", f"serving.vertex_endpoint.endpoint={ENDPOINT}",
            "serving.vertex_endpoint.model_id=penguin", f"serving.vertex_endpoint.api_endpoint={fake_url}",
            # No prebuilt image runs TF 2.16 (docs/serving.md); the stand-in loads no model, so nothing is at risk.
            "serving.vertex_endpoint.accept_older_image_tf=true", *extra]


@pytest.mark.parametrize("bad, field", [
    ("serving.vertex_endpoint.canary_percent=100", "canary_percent"),
    ("serving.vertex_endpoint.canary_percent=0", "canary_percent"),
    ("serving.vertex_endpoint.endpoint=endpoints/4x", "endpoint"),
    ("serving.vertex_endpoint.endpoint=42", "an id"),  # no vertex section to say where it is
    ("serving.vertex_endpoint.image_uri=gcr.io/x/tf-serving:1", "prebuilt TensorFlow"),
    ("serving.vertex_endpoint.model_id=9lives", "model_id"),
    ("serving.vertex_endpoint.max_replicas=0", "max_replicas"),
    ("serving.vertex_endpoint.api_endpoint=http://example.com", "api_endpoint"),
])
def test_the_section_refuses_bad_values_naming_the_field(tmp_path, bad, field):
    with pytest.raises(ConfigError, match=field):
        load_config(CONFIG, _sets(tmp_path, "http://127.0.0.1:1", bad))


def test_an_image_whose_tensorflow_is_older_than_the_exporters_is_refused_unless_accepted(tmp_path):
    """Vertex's newest prebuilt TensorFlow prediction image runs 2.15; our models are exported by 2.16, and the gate
    can load them under 2.16 only (fail closed: the config refuses, and so does the gate for a spec that got past)."""
    from components.serving import serving_gate

    sets = [s for s in _sets(tmp_path, "http://127.0.0.1:1") if "accept_older_image_tf" not in s]
    with pytest.raises(ConfigError, match=r"tf2-cpu.2-15:latest runs TensorFlow 2.15, older than the 2.16 .*"
                                          "accept_older_image_tf: true"):
        load_config(CONFIG, sets)
    config = load_config(CONFIG, [*sets, "serving.vertex_endpoint.accept_older_image_tf=true"])
    target = config.serving.endpoint_target(config.vertex, NAME)
    refused = serving_gate.check(str(tmp_path), serving_gate.GateSettings(
        model_name=NAME, vertex_endpoint={**target, "accept_older_image_tf": False}))
    assert not refused.ok and "older than the 2.16" in refused.reason and "accept_older_image_tf is false" in \
        refused.reason


@pytest.mark.parametrize("region, registry", [("us-central1", "us"), ("europe-west4", "europe"),
                                              ("asia-northeast1", "asia"), ("me-west1", "europe")])
def test_the_default_prediction_image_is_in_the_registry_nearest_the_endpoints_region(tmp_path, region, registry):
    endpoint = f"projects/my-project/locations/{region}/endpoints/42"
    config = load_config(CONFIG, [*_sets(tmp_path, "http://127.0.0.1:1"),
                                  f"serving.vertex_endpoint.endpoint={endpoint}"])
    image = config.serving.endpoint_target(config.vertex, NAME)["image_uri"]
    assert image == f"{registry}-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


def test_target_vertex_endpoint_needs_its_section():
    with pytest.raises(ConfigError, match="needs a serving.vertex_endpoint section"):
        load_config(CONFIG, ["serving.target=vertex_endpoint"])


def test_the_pusher_uploads_and_deploys_each_pushed_version(tmp_path, fake, gcs_bucket, gcs_emulator, monkeypatch):
    from components.gcs import MOUNT_ENV
    from components.pusher import GATE, VERTEX
    from components.serving import serving_gate
    from tests import serving_models

    # As on Vertex (and in a dry run): the serving dir under the bucket mount, the push's claims on GCS.
    monkeypatch.setenv(MOUNT_ENV, str(tmp_path / "gcs"))
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)

    config = load_config(CONFIG, _sets(tmp_path / "root", fake.url, "serving.rollout=canary"))
    target = config.serving.endpoint_target(config.vertex, NAME)
    settings = serving_gate.GateSettings(model_name=NAME, warmup_requests=2, rollout="canary", vertex_endpoint=target)
    examples = serving_models.eval_split(tmp_path / "examples")
    base = tmp_path / "gcs" / gcs_bucket.name / "serving"
    first = serving_models.push(tmp_path, serving_models.save_model(tmp_path / "a", 0.5), examples, base, "a", settings)
    second = serving_models.push(tmp_path, serving_models.save_model(tmp_path / "b", 0.7), examples, base, "b",
                                 settings)
    v1, v2 = (int(p.get_string_custom_property("pushed_version")) for p in (first, second))
    assert "champion: version" in first.get_string_custom_property(VERTEX)
    assert "the endpoint's image was not checked" in first.get_string_custom_property(GATE)
    assert "10%" in second.get_string_custom_property(VERTEX)
    record = ve.status(ve.Target(**target), str(base))
    assert (record.served(ve.CHAMPION).version, record.served(ve.CHALLENGER).version) == (v1, v2)
    assert sorted(record.split.values()) == [10, 90]
    upload = [b for m, p, b in fake.requests if p.endswith("models:upload")][-1]
    assert upload["model"]["artifactUri"] == f"gs://{gcs_bucket.name}/serving/{v2}"
    assert upload["parentModel"].endswith("/models/penguin")
    assert rollout.labels(str(base)) == Labels(v1, v2)  # the TF Serving labels follow: stable = champion


def test_turning_the_target_on_for_a_serving_dir_that_served_deploys_its_stable_as_champion_first(
        tmp_path, fake, gcs_bucket, gcs_emulator, monkeypatch):
    """The first push to an endpoint of a serving dir whose labels serve a stable version: that version is uploaded
    and deployed as champion, then the new one as challenger at the canary's share. It used to deploy the new
    version alone at 100% while the labels made it the canary, and every later command refused the disagreement."""
    from components.gcs import MOUNT_ENV
    from components.serving import serving_gate
    from tests import serving_models
    from tests.test_rollout import _version

    monkeypatch.setenv(MOUNT_ENV, str(tmp_path / "gcs"))
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    config = load_config(CONFIG, _sets(tmp_path / "root", fake.url, "serving.rollout=canary"))
    target = config.serving.endpoint_target(config.vertex, NAME)
    base = tmp_path / "gcs" / gcs_bucket.name / "serving"
    _version(base, 1)
    rollout.after_push(str(base), NAME, 1, "canary", "run-1")  # served under TF Serving alone: stable 1
    settings = serving_gate.GateSettings(model_name=NAME, warmup_requests=2, rollout="canary", vertex_endpoint=target)
    pushed = serving_models.push(tmp_path, serving_models.save_model(tmp_path / "b", 0.7),
                                 serving_models.eval_split(tmp_path / "examples"), base, "b", settings)
    v2 = int(pushed.get_string_custom_property("pushed_version"))
    assert rollout.labels(str(base)) == Labels(1, v2)
    record = ve.agreeing(ve.Target(**target), str(base), rollout.labels(str(base)))  # no disagreement
    champion, challenger = record.served(ve.CHAMPION), record.served(ve.CHALLENGER)
    assert (champion.version, challenger.version) == (1, v2)
    assert record.split == {champion.deployed_model_id: 90, challenger.deployed_model_id: 10}
    uploads = [b["model"]["artifactUri"] for m, p, b in fake.requests if p.endswith("models:upload")]
    assert sorted(uploads) == [f"gs://{gcs_bucket.name}/serving/1", f"gs://{gcs_bucket.name}/serving/{v2}"]
    version = fake.models[ve.Target(**target).model]["versions"][champion.model_version_id]
    assert {"champion", "default"} <= set(version["versionAliases"])


def _two_canary_pushes(root, sets) -> tuple[str, ve.Target]:
    """What two canary pushes leave on the endpoint stand-in and in the serving dir (the Pusher's own test above
    pushes real models): version 1 champion and stable, version 2 challenger and canary."""
    from tests.test_rollout import _version

    config = load_config(CONFIG, sets)
    base = config.pipeline.serving_dir
    target = ve.Target(**config.serving.endpoint_target(config.vertex, NAME))
    for number in (1, 2):
        _version(root / "serving_model" / NAME, number)
        ve.deploy_canary(target, base, number, _uploaded(target, number), "t")
        rollout.after_push(base, NAME, number, "canary", f"run-{number}")
    return base, target


def _args(sets) -> list[str]:
    return ["--config", CONFIG, *[x for s in sets for x in ("--set", s)]]


def test_the_serving_commands_move_the_endpoint_and_the_labels_in_step(tmp_path, fake, capsys):
    from pipeline.cli import main
    from tests.test_rollout import _version

    root = tmp_path / "root"
    base, target = _two_canary_pushes(root, _sets(root, fake.url))
    args = _args(_sets(root, fake.url))

    assert main(["serving", "status", *args]) == 0
    assert "challenger: version 2" in capsys.readouterr().out
    assert main(["serving", "promote", *args]) == 0
    assert rollout.labels(base) == Labels(2) and ve.status(target, base).served(ve.CHAMPION).version == 2
    assert len(fake.endpoints[ENDPOINT]["deployedModels"]) == 1
    ve.deploy_canary(target, base, 3, _uploaded(target, 3), "t")
    _version(root / "serving_model" / NAME, 3)
    rollout.after_push(base, NAME, 3, "canary", "run-3")
    assert main(["serving", "rollback", *args]) == 0
    assert rollout.labels(base) == Labels(2) and ve.status(target, base).challenger is None
    assert main(["serving", "rollback", "--to", "7", *args]) == 1  # not on disk: refused before the endpoint moves
    assert "version 7 is not in" in capsys.readouterr().err and ve.status(target, base).served(ve.CHAMPION).version == 2
    assert main(["serving", "rollback", "--to", "1", *args]) == 0  # a promoted champion back: version 1 redeployed
    record = ve.status(target, base)
    assert rollout.labels(base) == Labels(1) and record.served(ve.CHAMPION).version == 1 and record.challenger is None
    restored = record.served(ve.CHAMPION).deployed_model_id
    assert [d["id"] for d in fake.endpoints[ENDPOINT]["deployedModels"]] == [restored]
    assert record.split == {restored: 100}
    assert main(["serving", "rollback", *args]) == 0  # no challenger out: the stable before (2), redeployed
    assert rollout.labels(base) == Labels(2) and ve.status(target, base).served(ve.CHAMPION).version == 2
    fake.endpoints[ENDPOINT]["trafficSplit"] = {}  # changed behind our back: every command fails closed
    assert main(["serving", "status", *args]) == 1
    assert "traffic_split" in capsys.readouterr().err


def test_labels_moved_without_the_endpoint_stop_every_command_before_the_endpoint_moves(tmp_path, fake, capsys):
    from pipeline.cli import main

    root = tmp_path / "root"
    base, target = _two_canary_pushes(root, _sets(root, fake.url))
    rollout.rollback(base, NAME, "a TF Serving-only tool")  # the labels drop the canary, the endpoint keeps it
    before = fake.endpoints[ENDPOINT]["trafficSplit"], [d["id"] for d in fake.endpoints[ENDPOINT]["deployedModels"]]
    args = _args(_sets(root, fake.url))
    for command in (["status"], ["promote"], ["rollback"], ["rollback", "--to", "1"]):
        assert main(["serving", *command, *args]) == 1, command
        assert "the serving labels in" in capsys.readouterr().err
    assert (fake.endpoints[ENDPOINT]["trafficSplit"],
            [d["id"] for d in fake.endpoints[ENDPOINT]["deployedModels"]]) == before  # nothing moved
    assert ve.status(target, base).served(ve.CHALLENGER).version == 2 and rollout.labels(base) == Labels(1)


def test_a_real_endpoint_needs_the_serving_dir_on_gcs(tmp_path):
    sets = [s for s in _sets(tmp_path, "") if not s.startswith("serving.vertex_endpoint.api_endpoint")]
    with pytest.raises(ConfigError, match="must be gs://"):
        load_config(CONFIG, sets)


def _counted(model: str, answered: int, failed: int, latency_ms: float, end: float) -> list:
    """A deployed model's Cloud Monitoring series on the endpoint, each a single one-minute point ending at `end`:
    its responses by status class and its total latency (what the check reads)."""
    from components.serving.canary_monitoring import DEPLOYED_MODEL, LATENCIES, RESPONSE_CODE, RESPONSE_COUNT
    from tests.fake_monitoring import series

    def one(metric, value, **labels):
        return series(metric, {DEPLOYED_MODEL: model, **labels}, [(end, value)], ENDPOINT.rsplit("/", 1)[-1],
                      "us-central1", "my-project")
    return [one(RESPONSE_COUNT, answered, **{RESPONSE_CODE: "2xx"}),
            one(RESPONSE_COUNT, failed, **{RESPONSE_CODE: "5xx"}),
            one(LATENCIES, (answered + failed, latency_ms), latency_type="total")]


@pytest.fixture
def monitoring():
    from tests.fake_monitoring import FakeMonitoring

    m = FakeMonitoring()
    m.address = m.start()
    yield m
    m.stop()


def _failing_challenger_out(root, fake, monitoring):
    """Two canary pushes on the endpoint stand-in, and Cloud Monitoring series in which the challenger (version 2)
    fails 10 of 50 requests against none of the champion's 100. Returns the --set list, the target and the
    champion's deployed model id."""
    sets = _sets(root, fake.url, f"serving.check.monitoring_endpoint={monitoring.address}",
                 "serving.check.min_canary_minutes=0", "serving.check.min_requests=10")
    base, target = _two_canary_pushes(root, sets)
    record = ve.status(target, base)
    champion, challenger = (record.served(w).deployed_model_id for w in (ve.CHAMPION, ve.CHALLENGER))
    end = rollout.canary_since(base) + 1  # inside the window: after the challenger went out, before the check
    monitoring.series[target.project] = [*_counted(champion, 100, 0, 5.0, end), *_counted(challenger, 40, 10, 5.0, end)]
    time.sleep(max(0.0, end + 1 - time.time()))
    return sets, target, champion


def _rolled_back(fake, target, base, champion) -> bool:
    return (rollout.labels(base) == Labels(1) and ve.status(target, base).challenger is None
            and [d["id"] for d in fake.endpoints[ENDPOINT]["deployedModels"]] == [champion])


def test_serving_check_on_the_endpoint_reads_cloud_monitoring_and_rolls_a_failing_challenger_back(tmp_path, fake,
                                                                                                  monitoring, capsys):
    from components.serving.canary_monitoring import LATENCIES, RESPONSE_COUNT
    from pipeline.cli import main

    root = tmp_path / "root"
    sets, target, champion = _failing_challenger_out(root, fake, monitoring)
    args = _args(sets)

    assert main(["serving", "check", "--stable-url", "http://127.0.0.1:1/m", *args]) == 2  # scrapes: TF Serving's
    assert "Cloud Monitoring" in capsys.readouterr().err
    assert main(["serving", "check", *args]) == 0
    out = capsys.readouterr().out
    assert "rollback canary 2" in out and "20.00%" in out, out
    assert _rolled_back(fake, target, str(root / "serving_model" / NAME), champion)
    asked = {r.filter.split('"')[1] for r in monitoring.requests}
    assert asked == {RESPONSE_COUNT, LATENCIES}


def test_the_runs_first_step_decides_on_the_endpoint_too(tmp_path, fake, monitoring, caplog):
    """serving.check.before_run with this target: the CanaryCheck step the DAG builds reads Cloud Monitoring and
    moves the endpoint with the labels, as the command does (not TF Serving's scrapes, which would move the labels
    alone and leave the endpoint disagreeing)."""
    from pipeline.dag.canary import canary_check_step

    root = tmp_path / "root"
    sets, target, champion = _failing_challenger_out(root, fake, monitoring)
    step = canary_check_step(load_config(CONFIG, [*sets, "serving.check.before_run=true"]), run_lease=False)
    with caplog.at_level("INFO"):
        step.executor_spec.executor_class().Do({}, {}, step.exec_properties)
    assert "rollback canary 2: canary error rate 20.00%" in caplog.text
    assert _rolled_back(fake, target, str(root / "serving_model" / NAME), champion)
    assert monitoring.requests, "the step did not read Cloud Monitoring"
    assert "vertex endpoint: challenger 2 undeployed" in rollout.events(str(root / "serving_model" / NAME))[-1].by


def test_a_dry_run_refuses_the_first_step_on_an_endpoint_without_a_monitoring_stand_in(tmp_path):
    from pipeline.dryrun.run import dry_run

    config = load_config("configs/vertex.yaml", ["serving.target=vertex_endpoint", "serving.check.before_run=true",
                                                 "serving.vertex_endpoint.endpoint=42",
                                                 "serving.vertex_endpoint.model_id=penguin",
                                                 "serving.vertex_endpoint.accept_older_image_tf=true"])
    with pytest.raises(ConfigError, match="Cloud Monitoring"):
        dry_run(config, tmp_path / "dryrun")
