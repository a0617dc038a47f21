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
