"""infra/serving/: TF Serving on the model config files the Pusher writes (components/serving/model_config.py), a
stable and
a canary server each; both files validated against their schemas (tests/schemas/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from components.serving.model_config import TRACK_FILES
from pipeline.config import load_config
from tests.infra_support import INFRA, PINNED_IMAGE, VERTEX_CONFIG

SERVING = INFRA / "serving"
COMPOSE_SCHEMA = Path(__file__).resolve().parent / "schemas" / "compose-spec.json"
# The Kubernetes minor whose API the manifests are checked against (kubernetes-validate ships schemas up to 1.37);
# strict: a field the API does not know is an error, not an ignored key.
K8S_VERSION = "1.31"
FLAGS = {"--model_config_file_poll_wait_seconds=30", "--monitoring_config_file=/etc/tf-serving/monitoring.config",
         "--allow_version_labels_for_unavailable_models=true",
         "--port=8500", "--rest_api_port=8501"}


def _k8s() -> list[dict]:
    return [d for d in yaml.safe_load_all((SERVING / "k8s.yaml").read_text()) if d]


def test_the_compose_file_is_valid_compose_and_serves_stable_and_canary_from_their_config_files():
    compose = yaml.safe_load((SERVING / "docker-compose.yaml").read_text())
    jsonschema.validate(compose, json.loads(COMPOSE_SCHEMA.read_text()))
    services = compose["services"]
    assert set(services) == {"tf-serving", "tf-serving-canary"}
    for name, track in (("tf-serving", "stable"), ("tf-serving-canary", "canary")):
        svc = services[name]
        assert PINNED_IMAGE.match(svc["image"]) and svc["read_only"] is True
        assert f"--model_config_file=${{MODEL_DIR}}/{TRACK_FILES[track]}" in svc["command"]
        assert FLAGS <= set(svc["command"]) and not any(a.startswith("--model_base_path") for a in svc["command"])
        # Mounted at its own path: the config files name the serving dir as the pipeline wrote it.
        source, target, mode = svc["volumes"][0].rsplit(":", 2)
        assert source.startswith("${MODEL_DIR:?") and target == "${MODEL_DIR}" and mode == "ro"
        assert "/v1/models/penguin-tpu" in " ".join(svc["healthcheck"]["test"])
    assert {p.split(":")[1] for s in services.values() for p in s["ports"]} == {"8500", "8501", "8510", "8511"}


def test_every_k8s_manifest_is_valid_for_its_kind_and_api_version():
    for doc in _k8s():
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_validators_refuse_what_compose_and_kubernetes_would():
    compose = yaml.safe_load((SERVING / "docker-compose.yaml").read_text())
    compose["services"]["tf-serving"]["comand"] = []
    with pytest.raises(jsonschema.ValidationError, match="comand"):
        jsonschema.validate(compose, json.loads(COMPOSE_SCHEMA.read_text()))
    [stable] = [d for d in _k8s() if d["kind"] == "Deployment" and d["metadata"]["labels"]["track"] == "stable"]
    stable["spec"]["replicas"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(stable, K8S_VERSION, strict=True)
    stable["spec"]["replicas"] = 4
    stable["spec"]["template"]["spec"]["containers"][0]["argz"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(stable, K8S_VERSION, strict=True)


def test_a_canary_deployment_beside_stable_takes_its_replica_share_of_the_service():
    docs = _k8s()
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "ServiceAccount", "Deployment", "Service", "NetworkPolicy"} <= kinds
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {"penguin-serving"}
    deployments = {d["metadata"]["labels"]["track"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {"stable", "canary"}
    serving_dir = load_config(VERTEX_CONFIG).pipeline.serving_dir
    [service] = [d for d in docs if d["kind"] == "Service"]
    for track, deployment in deployments.items():
        pod = deployment["spec"]["template"]
        assert deployment["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"] == {
            "app": "penguin-serving", "track": track}
        # The Service selects both tracks; each Deployment only its own pods.
        assert set(service["spec"]["selector"].items()) <= set(pod["metadata"]["labels"].items())
        [container] = pod["spec"]["containers"]
        assert PINNED_IMAGE.match(container["image"])
        assert f"--model_config_file={serving_dir}/{TRACK_FILES[track]}" in container["args"]
        assert FLAGS <= set(container["args"])
        assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models/penguin-tpu"
        assert container["livenessProbe"]["tcpSocket"]["port"] == "grpc"
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["spec"]["serviceAccountName"] == "penguin-serving"
    replicas = {t: d["spec"]["replicas"] for t, d in deployments.items()}
    assert replicas["canary"] / sum(replicas.values()) == 0.2  # the share the manifest's comments state
    [account] = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"].startswith("penguin-serving@")
    assert {p["port"] for p in service["spec"]["ports"]} == {8500, 8501}


def test_both_servers_publish_the_prometheus_page_serving_check_scrapes():
    """tensorflow_serving/config/monitoring_config.proto: MonitoringConfig.prometheus_config {enable, path} (that proto
    is not in the tensorflow-serving-api wheel, so the text is compared, not parsed)."""
    text = (SERVING / "monitoring.config").read_text()
    assert "enable: true" in text and 'path: "/monitoring/prometheus/metrics"' in text
    [config_map] = [d for d in _k8s() if d["kind"] == "ConfigMap"]
    assert config_map["data"]["monitoring.config"] == text
    for deployment in (d for d in _k8s() if d["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        [mount] = pod["containers"][0]["volumeMounts"]
        assert mount["mountPath"] == "/etc/tf-serving" and mount["readOnly"] is True
        assert pod["volumes"] == [{"name": mount["name"], "configMap": {"name": config_map["metadata"]["name"]}}]
    compose = yaml.safe_load((SERVING / "docker-compose.yaml").read_text())
    for svc in compose["services"].values():
        assert "./monitoring.config:/etc/tf-serving/monitoring.config:ro" in svc["volumes"]
