"""The Vertex endpoint target (components/serving/vertex_endpoint.py) through the real google-cloud-aiplatform client
against the loopback stand-in (pipeline/dryrun/vertex_endpoints.py), and each rule the stand-in enforces."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1

from components.errors import RolloutError, VertexStateMismatch
from components.gcs import api_uri
from components.serving import vertex_endpoint as ve
from pipeline.dryrun.vertex_endpoints import VertexEndpoints

LOC = "projects/p/locations/us-central1"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


@pytest.fixture(autouse=True)
def mounted(tmp_path, monkeypatch):
    """tmp_path as the bucket mount (Vertex's /gcs/): versions under it are uploaded as their gs:// URIs."""
    from components.gcs import MOUNT_ENV

    monkeypatch.setenv(MOUNT_ENV, str(tmp_path))


@pytest.fixture
def fake():
    f = VertexEndpoints()
    f.add_endpoint(f"{LOC}/endpoints/42")
    url = f.start()
    f.url = url
    yield f
    f.stop()


def _target(fake, **kw):
    return ve.Target(project="p", region="us-central1", endpoint=f"{LOC}/endpoints/42", model_id="penguin",
                     display_name="penguin", image_uri=IMAGE, api_endpoint=fake.url, **kw)


def _push(target, base, version):
    mv = ve.upload_version(target, f"{base}/{version}", version)
    return ve.deploy_canary(target, base, version, mv, "test")


def _aliases(fake, vid):
    return sorted(fake.models[f"{LOC}/models/penguin"]["versions"][vid]["versionAliases"])


def test_upload_deploy_promote_rollback(fake, tmp_path):
    target, base = _target(fake), str(tmp_path)
    first = _push(target, base, 1)  # nothing deployed yet: all traffic, champion at once
    assert first.action == "promote" and first.served(ve.CHAMPION).version == 1
    assert _aliases(fake, "1") == ["champion", "default"]
    champion_dm = first.served(ve.CHAMPION).deployed_model_id
    assert fake.endpoints[target.endpoint]["trafficSplit"] == {champion_dm: 100}

    second = _push(target, base, 2)
    upload = [b for m, p, b in fake.requests if p.endswith("models:upload")][-1]
    assert upload["parentModel"] == f"{LOC}/models/penguin" and upload["model"]["artifactUri"] == api_uri(f"{base}/2")
    assert upload["model"]["artifactUri"].startswith("gs://")
    assert _aliases(fake, "2") == ["challenger"] and _aliases(fake, "1") == ["champion", "default"]
    challenger_dm = second.served(ve.CHALLENGER).deployed_model_id
    assert fake.endpoints[target.endpoint]["trafficSplit"] == {champion_dm: 90, challenger_dm: 10}
    assert "10%" in ve.describe(ve.status(target, base))

    promoted = ve.promote(target, base, "test")
    assert promoted.served(ve.CHAMPION).version == 2 and promoted.challenger is None
    assert _aliases(fake, "2") == ["champion", "default"] and _aliases(fake, "1") == []
    endpoint = fake.endpoints[target.endpoint]
    assert endpoint["trafficSplit"] == {challenger_dm: 100}
    assert [d["id"] for d in endpoint["deployedModels"]] == [challenger_dm]  # the old champion undeployed

    third = _push(target, base, 3)
    third_dm = third.served(ve.CHALLENGER).deployed_model_id
    back = ve.rollback(target, base, "test")
    assert back.served(ve.CHAMPION).version == 2 and back.challenger is None
    assert endpoint["trafficSplit"] == {challenger_dm: 100}
    assert third_dm not in {d["id"] for d in endpoint["deployedModels"]}
    assert _aliases(fake, "3") == [] and _aliases(fake, "2") == ["champion", "default"]
    with pytest.raises(RolloutError, match="no challenger"):
        ve.promote(target, base, "test")


def test_direct_rollout_deploys_at_100_and_promotes(fake, tmp_path):
    target, base = _target(fake), str(tmp_path)
    _push(target, base, 1)
    mv = ve.upload_version(target, f"{base}/2", 2)
    done = ve.deploy_canary(target, base, 2, mv, "test", share=100)
    assert done.action == "promote" and done.served(ve.CHAMPION).version == 2
    assert list(fake.endpoints[target.endpoint]["trafficSplit"].values()) == [100]


def test_status_fails_closed_when_the_endpoint_disagrees(fake, tmp_path):
    target, base = _target(fake), str(tmp_path)
    _push(target, base, 1)
    _push(target, base, 2)
    split = fake.endpoints[target.endpoint]["trafficSplit"]
    fake.endpoints[target.endpoint]["trafficSplit"] = {k: (100 if v == 90 else 0) for k, v in split.items()}
    with pytest.raises(VertexStateMismatch, match="traffic_split"):
        ve.status(target, base)
    with pytest.raises(VertexStateMismatch):
        ve.promote(target, base, "test")  # nothing moves on a disagreement
    fake.endpoints[target.endpoint]["trafficSplit"] = split
    fake.models[f"{LOC}/models/penguin"]["versions"]["2"]["versionAliases"] = []
    with pytest.raises(VertexStateMismatch, match="aliases"):
        ve.status(target, base)


# --- each rule of the stand-in, through the real client ------------------------------------------------------

def _endpoints(fake):
    return ve._clients(_target(fake))[1]


def _models(fake):
    return ve._clients(_target(fake))[0]


def _two_deployed(fake, tmp_path):
    target = _target(fake)
    _push(target, str(tmp_path), 1)
    r = _push(target, str(tmp_path), 2)
    return target, r.served(ve.CHAMPION).deployed_model_id, r.served(ve.CHALLENGER).deployed_model_id


def test_rule_split_sums_to_100(fake, tmp_path):
    target, a, b = _two_deployed(fake, tmp_path)
    with pytest.raises(gexc.BadRequest, match="add up to 100"):
        _endpoints(fake).update_endpoint(endpoint={"name": target.endpoint, "traffic_split": {a: 50, b: 40}},
                                         update_mask={"paths": ["traffic_split"]})


def test_rule_split_names_deployed_models_only(fake, tmp_path):
    target, a, b = _two_deployed(fake, tmp_path)
    with pytest.raises(gexc.BadRequest, match="not a DeployedModel"):
        _endpoints(fake).update_endpoint(endpoint={"name": target.endpoint, "traffic_split": {a: 50, "999": 50}},
                                         update_mask={"paths": ["traffic_split"]})


def test_rule_no_undeploy_with_traffic(fake, tmp_path):
    target, a, b = _two_deployed(fake, tmp_path)
    with pytest.raises(gexc.BadRequest, match="still has 10%"):
        _endpoints(fake).undeploy_model(endpoint=target.endpoint, deployed_model_id=b).result()


def test_rule_alias_unique_within_a_model(fake, tmp_path):
    _two_deployed(fake, tmp_path)
    _models(fake).merge_version_aliases(name=f"{LOC}/models/penguin@1", version_aliases=["challenger"])
    assert "challenger" in _aliases(fake, "1") and "challenger" not in _aliases(fake, "2")


def test_rule_exactly_one_default(fake, tmp_path):
    _two_deployed(fake, tmp_path)
    with pytest.raises(gexc.BadRequest, match="default"):
        _models(fake).merge_version_aliases(name=f"{LOC}/models/penguin@1", version_aliases=["-default"])
    _models(fake).merge_version_aliases(name=f"{LOC}/models/penguin@2", version_aliases=["default"])
    versions = fake.models[f"{LOC}/models/penguin"]["versions"].values()
    assert [v["versionId"] for v in versions if "default" in v["versionAliases"]] == ["2"]


def test_rule_alias_format(fake, tmp_path):
    _two_deployed(fake, tmp_path)
    with pytest.raises(gexc.BadRequest, match="does not match"):
        _models(fake).merge_version_aliases(name=f"{LOC}/models/penguin@1", version_aliases=["Champion_1"])


def test_rule_artifact_uri_is_gcs(fake, tmp_path):
    with pytest.raises(gexc.BadRequest, match="artifactUri"):
        ve.upload_version(_target(fake), "/elsewhere/1", 1)  # outside the mount: a local path Vertex can't read


def test_rule_parent_model_must_exist(fake):
    model = aiplatform_v1.Model(display_name="x", artifact_uri="gs://b/m/1",
                                container_spec=aiplatform_v1.ModelContainerSpec(image_uri=IMAGE))
    with pytest.raises(gexc.NotFound, match="models/nope"):
        _models(fake).upload_model(request=aiplatform_v1.UploadModelRequest(
            parent=LOC, model=model, parent_model=f"{LOC}/models/nope")).result()


def test_rule_long_running_operations(fake, tmp_path):
    target = _target(fake)
    ve.upload_version(target, f"{tmp_path}/1", 1)
    answer = [r for r in fake.requests if r[1].endswith("models:upload")]
    op = fake.serve("GET", f"/v1/{next(iter(fake.operations))}", {}, {})
    assert answer and op[0] == 200 and op[1]["done"] is True
    assert op[1]["response"]["@type"].endswith("UploadModelResponse")


def test_rule_replicas(fake, tmp_path):
    target = _target(fake, min_replicas=0)
    mv = ve.upload_version(target, f"{tmp_path}/1", 1)
    with pytest.raises(gexc.BadRequest, match="min_replica_count"):
        ve.deploy_canary(target, str(tmp_path), 1, mv, "test")


def test_a_new_push_replaces_the_challenger_out(fake, tmp_path):
    target, base = _target(fake), str(tmp_path)
    _push(target, base, 1)
    old = _push(target, base, 2).served(ve.CHALLENGER).deployed_model_id
    new = _push(target, base, 3)
    assert new.served(ve.CHAMPION).version == 1 and new.served(ve.CHALLENGER).version == 3
    deployed = {d["id"] for d in fake.endpoints[target.endpoint]["deployedModels"]}
    assert old not in deployed and len(deployed) == 2
    assert _aliases(fake, "2") == [] and _aliases(fake, "3") == ["challenger"]
    assert [r.action for r in ve.records(base)] == ["push", "promote", "push", "rollback", "push"]


def test_stand_ins_over_one_state_file_are_one_service(tmp_path):
    """The dry runs and serving commands on one directory each start a stand-in over its state file: one after
    another or at once, they see one registry and endpoint, and the rules hold across them."""
    state = tmp_path / "state" / "state.json"
    endpoint = f"{LOC}/endpoints/42"
    first, second = VertexEndpoints(state), VertexEndpoints(state)
    assert first.add_endpoint(endpoint) and not second.add_endpoint(endpoint)
    first.url, second.url = first.start(), second.start()
    try:
        one, two = _target(first), _target(second)
        pushed = _push(one, str(tmp_path), 1)
        assert ve.upload_version(two, f"{tmp_path}/2", 2) == "2"  # the other front sees version 1: a new version
        record = ve.status(two, str(tmp_path))  # the other front reads what the first deployed
        assert record.served(ve.CHAMPION).deployed_model_id == pushed.served(ve.CHAMPION).deployed_model_id
        with pytest.raises(gexc.BadRequest, match="add up to 100"):  # rule 1, refused by the other front
            _endpoints(second).update_endpoint(
                endpoint={"name": endpoint, "traffic_split": {pushed.served(ve.CHAMPION).deployed_model_id: 50}},
                update_mask={"paths": ["traffic_split"]})
    finally:
        first.stop()
        second.stop()
    later = VertexEndpoints(state)  # a later invocation
    later.url = later.start()
    try:
        assert ve.status(_target(later), str(tmp_path)).served(ve.CHAMPION).version == 1
        assert sorted(later.models[f"{LOC}/models/penguin"]["versions"]) == ["1", "2"]
    finally:
        later.stop()


def test_a_dry_run_points_the_endpoint_target_at_its_stand_in_and_never_at_google(tmp_path):
    from pipeline.config import load_config
    from pipeline.dryrun.view import ENDPOINTS_STATE, endpoint_stand_in
    from pipeline.errors import ConfigError

    sets = ["serving.target=vertex_endpoint", "serving.vertex_endpoint.endpoint=42",
            "serving.vertex_endpoint.model_id=penguin", "serving.vertex_endpoint.accept_older_image_tf=true"]
    config = load_config("configs/vertex.yaml", sets)
    with endpoint_stand_in(config, tmp_path) as seen:
        url = seen.serving.vertex_endpoint.api_endpoint
        assert url.startswith("http://127.0.0.1:") and config.serving.vertex_endpoint.api_endpoint == ""
        target = ve.Target(**seen.serving.endpoint_target(seen.vertex, seen.pipeline.name))
        assert ve.status(target, str(tmp_path)) is None  # the configured endpoint exists there, nothing deployed
    assert target.endpoint in (tmp_path / ENDPOINTS_STATE).read_text()
    google = load_config("configs/vertex.yaml", [*sets, "serving.vertex_endpoint.api_endpoint="
                                                        "us-central1-aiplatform.googleapis.com"])
    with pytest.raises(ConfigError, match="a dry run reaches no Google API"):
        with endpoint_stand_in(google, tmp_path):
            pass
    tf_serving = load_config("configs/vertex.yaml")
    with endpoint_stand_in(tf_serving, tmp_path) as seen:
        assert seen is tf_serving


def test_what_cannot_reach_the_dry_runs_stand_in_is_refused_naming_why(tmp_path, capsys):
    from pipeline.cli import main
    from pipeline.config import load_config
    from pipeline.dryrun.run import dry_run
    from pipeline.errors import ConfigError

    sets = ["serving.target=vertex_endpoint", "serving.vertex_endpoint.endpoint=42",
            "serving.vertex_endpoint.model_id=penguin", "serving.vertex_endpoint.accept_older_image_tf=true"]
    spec = tmp_path / "pipeline.json"
    spec.write_text("{}")
    with pytest.raises(ConfigError, match="--spec with serving.target vertex_endpoint: the dry run compiles"):
        dry_run(load_config("configs/vertex.yaml", sets), tmp_path / "dryrun", template=spec)
    assert not (tmp_path / "dryrun").exists()
    assert main(["serving", "status", "--config", "configs/vertex.yaml", *(f"--set={s}" for s in sets),
                 "--dryrun-dir", str(tmp_path / "none")]) != 0
    assert "no dry run's bucket at" in capsys.readouterr().err
    # The local default config has no bucket to map (what a person types without --config).
    assert main(["serving", "status", "--dryrun-dir", str(tmp_path / "none")]) == 2
    assert "--dryrun-dir acts on a dry run of a cloud config" in capsys.readouterr().err
