"""The package compiled for the open-source KFP backend: what its API server and driver require
(pipeline/kubeflow/compile.py cites each), for configs/kubeflow.yaml."""

from __future__ import annotations

import pytest

from pipeline.kubeflow.compile import ENTRYPOINT, load_spec, with_caching
from pipeline.spec import cache_rule
from tests.kubeflow_support import compiled_package, kubeflow_config


def test_the_package_is_a_pipeline_spec_2_1_the_api_server_accepts():
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    spec = load_spec(compiled_package())
    parsed = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())  # strict, as the server parses it
    assert parsed.schema_version == "2.1.0"
    assert parsed.pipeline_info.name == kubeflow_config().pipeline.name


def test_no_task_needs_what_the_open_source_backend_cannot_run():
    """No resolver or importer task ("resolver not implemented yet", backend/src/v2/compiler/argocompiler/
    argo.go) and no preCacheCheck lifecycle hook, which its launcher never runs."""
    spec = load_spec(compiled_package())
    image = kubeflow_config().kubeflow.pipeline_image
    for label, executor in spec["deploymentSpec"]["executors"].items():
        assert set(executor) == {"container"}, label
        container = executor["container"]
        assert "lifecycle" not in container, label
        assert (container["image"], container["command"]) == (image, ENTRYPOINT), label


def test_every_executors_pod_is_labelled_for_the_pipelines_api_token_as_kfp_kubernetes_writes_it():
    """Multi-user Kubeflow projects the API token (kubeflow.in_cluster_token_file) only into pods labelled
    access-ml-pipeline: "true"; the platform spec puts the label on every executor's pod in kfp-kubernetes'
    add_pod_label form, the second document of the package, which kfp.Client sends as the run's platform_spec."""
    from google.protobuf import json_format
    from kfp.client.client import _extract_pipeline_yaml
    from kfp.pipeline_spec import pipeline_spec_pb2

    from pipeline.kubeflow.compile import load_platform_spec

    package = compiled_package()
    executors = load_spec(package)["deploymentSpec"]["executors"]
    platform = load_platform_spec(package)
    json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())  # strict, as the API server parses it
    assert platform == {"platforms": {"kubernetes": {"deploymentSpec": {"executors": {
        label: {"podMetadata": {"labels": {"access-ml-pipeline": "true"}}} for label in executors}}}}}
    sent = _extract_pipeline_yaml(str(package)).to_dict()  # what create_run_from_pipeline_package sends
    assert set(sent) == {"pipeline_spec", "platform_spec"} and sent["platform_spec"] == platform
    assert load_platform_spec(with_caching(package, False)) == platform


@pytest.mark.parametrize("overrides", [(), ("data.spans=window(2)",)], ids=["flat", "spans"])
def test_every_task_caches_by_the_same_rule_as_on_vertex(overrides):
    spec = load_spec(compiled_package(*overrides))
    tasks = dict(cache_rule.dag_tasks(spec))
    never = {name for name, task in tasks.items() if cache_rule.never_cached(spec, task)}
    assert {"Snapshot", "ImportSchemaGen", "DriftGate", "ServingModel"} <= never
    for name, task in tasks.items():
        assert task["cachingOptions"] == {"enableCache": name not in never}, name

    # kfp.Client's --cache/--no-cache overrides root tasks only, and every task sits in the exit handler's
    # `tfx-dag` sub-DAG (pipeline/dag/run_lease.py), with spans most in the condition's sub-DAG too
    # (pipeline/spec/condition_group.py): with_caching writes the override into every task instead.
    assert set(spec["root"]["dag"]["tasks"]) == {"tfx-dag", "ReleaseRunLease"}
    assert {"RunLease", "ReleaseRunLease"} <= never
    for enable in (True, False):
        overridden = load_spec(with_caching(compiled_package(*overrides), enable))
        assert {name: task["cachingOptions"] for name, task in cache_rule.dag_tasks(overridden)} == dict.fromkeys(
            tasks, {"enableCache": enable})


def test_each_task_asks_for_its_resources_in_the_form_the_kfp_sdk_writes():
    """kubeflow.resources over the defaults, field by field, into each executor's ResourceSpec (the fields kfp 2.5's
    set_cpu_request & co. write: cpu in cores, memory in GB), which the backend's driver turns into the pod's
    requests and limits; what the dry run's container rule checks (pipeline/spec/rules/container.py)."""
    from pipeline.spec import model, rules
    from pipeline.spec.backends import KUBEFLOW

    spec = load_spec(compiled_package("kubeflow.resources={Trainer: {memory_limit: 32}, default: {cpu_limit: 2}}"))
    tasks = dict(cache_rule.dag_tasks(spec))
    resources = {name: cache_rule.task_executor(spec, task)["container"]["resources"]
                 for name, task in tasks.items() if cache_rule.task_executor(spec, task)}
    assert resources["Trainer"] == {"cpuRequest": 2.0, "cpuLimit": 2.0, "memoryRequest": 4.0, "memoryLimit": 32.0}
    assert resources["Transform"] == {"cpuRequest": 1.0, "cpuLimit": 2.0, "memoryRequest": 4.0, "memoryLimit": 8.0}
    assert resources["DataGate"] == {"cpuRequest": 0.5, "cpuLimit": 2.0, "memoryRequest": 1.0, "memoryLimit": 4.0}
    assert set(resources) >= {"RunLease", "Snapshot", "Pusher", "ReleaseRunLease"}
    assert rules.check(model.read(spec), KUBEFLOW) == []
    label = spec["components"][tasks["Trainer"]["componentRef"]["name"]]["executorLabel"]
    spec["deploymentSpec"]["executors"][label]["container"]["resources"]["cpuRequest"] = 4.0
    [violation] = rules.check(model.read(spec), KUBEFLOW)
    assert violation.rule == "container" and "4.0 is above the limit 2.0: Kubernetes refuses the pod" in str(violation)


@pytest.mark.parametrize("setting, message", [
    ("kubeflow.resources={Trainr: {cpu_request: 1}}", "kubeflow.resources names Trainr, which the pipeline has no "
                                                      "task of"),
    ("kubeflow.resources={Trainer: {cpu_request: 4, cpu_limit: 2}}", "cpu_request 4 is above cpu_limit 2"),
])
def test_resources_a_cluster_would_refuse_are_config_errors(setting, message, tmp_path):
    from pipeline.errors import ConfigError
    from pipeline.kubeflow.compile import compile_pipeline

    with pytest.raises(ConfigError, match=message):
        compile_pipeline(kubeflow_config(setting), tmp_path / "p.yaml")


def test_the_package_splits_three_ways_and_evaluates_on_test():
    from tests.test_vertex_compile import assert_three_splits

    assert_three_splits(load_spec(compiled_package()), kubeflow_config())
