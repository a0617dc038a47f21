"""The shipped configs/kubeflow.yaml, compiled as `compile` does for that target and dry-run twice as the
open-source KFP backend runs it (pipeline/spec/backends.py, KUBEFLOW): no lifecycle hooks, input
artifacts handed over untyped, the launcher's own executor-logs output; every task runs through our entrypoint
(pipeline/kubeflow/entrypoint.py). Run 2 finds run 1's push serving and uses it as its baseline."""

from __future__ import annotations

import copy
import csv
import io
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.kubeflow.compile import load_spec
from pipeline.spec import model, rules
from pipeline.spec.backends import KUBEFLOW, VERTEX
from pipeline.spec.condition_group import TFX_DAG

KUBEFLOW_YAML = "configs/kubeflow.yaml"
SHORT = ["trainer.train_steps=100", "trainer.eval_every_steps=100"]


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    from pipeline.kubeflow.compile import compile_pipeline

    return compile_pipeline(load_config(KUBEFLOW_YAML, ["data.spans=window(2)"]),
                            tmp_path_factory.mktemp("kfp") / "pipeline.yaml")


def test_a_pre_cache_hook_is_refused_for_kubeflow_but_not_for_vertex(package):
    # The open-source backend never runs lifecycle.preCacheCheck; a spec relying on it would silently lose it.
    pipeline_spec = copy.deepcopy(load_spec(package))
    assert rules.check(model.read(pipeline_spec), KUBEFLOW) == []
    executors = pipeline_spec["deploymentSpec"]["executors"]
    label = next(label for label in executors if label.startswith("Snapshot"))
    executors[label]["container"]["lifecycle"] = {"preCacheCheck": {"command": ["python", "-c", "pass"]}}
    [violation] = rules.check(model.read(pipeline_spec), KUBEFLOW)
    assert violation.rule == "container" and "does not run this hook" in str(violation)
    assert not [v for v in rules.check(model.read(pipeline_spec), VERTEX) if "hook" in str(v)]


def test_a_multi_user_dry_run_refuses_pods_without_the_api_token_label(package, tmp_path):
    """The run's own API calls need the token the access-ml-pipeline PodDefault projects into labelled pods only
    (pipeline/spec/backends.py cites it): a package without the platform spec, or with an executor missing the
    label, is refused before any task runs on multi-user Kubeflow (a profile namespace), not on standalone KFP."""
    from pipeline.dryrun.run import dry_run
    from pipeline.errors import SpecError
    from pipeline.kubeflow.compile import load_platform_spec, write_package
    from pipeline.spec.backends import multi_user

    spec, platform = load_spec(package), load_platform_spec(package)
    assert rules.check(model.read(spec, platform), multi_user(KUBEFLOW)) == []
    assert [v.rule for v in rules.check(model.read(spec), multi_user(KUBEFLOW))] == \
        ["pod-labels"] * len(spec["deploymentSpec"]["executors"])
    assert rules.check(model.read(spec), KUBEFLOW) == []  # standalone KFP: no PodDefault to select
    unlabelled = copy.deepcopy(platform)
    first = sorted(unlabelled["platforms"]["kubernetes"]["deploymentSpec"]["executors"])[0]
    unlabelled["platforms"]["kubernetes"]["deploymentSpec"]["executors"][first]["podMetadata"]["labels"] = {}
    [violation] = rules.check(model.read(spec, unlabelled), multi_user(KUBEFLOW))
    assert violation.rule == "pod-labels" and first in violation.field
    unlabelled["platforms"]["kubernetes"]["deploymentSpec"]["executors"][first]["nodeSelector"] = {"labels": {}}
    assert "not emulated by the dry run" in str(rules.check(model.read(spec, unlabelled), KUBEFLOW)[0])

    old = tmp_path / "old.yaml"  # a package compiled before the label: no platform spec
    write_package(old, spec, {})
    config = load_config(KUBEFLOW_YAML, ["kubeflow.namespace=team-a"])
    with pytest.raises(SpecError, match=r"(?s)multi-user Kubeflow Pipelines .*\[pod-labels\].*access-ml-pipeline"):
        dry_run(config, tmp_path / "dryrun", template=old, stream=io.StringIO())


def test_the_executor_input_is_built_as_the_open_source_driver_builds_it(package):
    from pipeline.dryrun import driver

    pipeline = model.read(load_spec(package))
    [group] = [t for t in pipeline.sub_dag(pipeline.root.tasks[TFX_DAG]).tasks.values() if t.kind == "dag"]
    trainer = pipeline.sub_dag(group).tasks["Trainer"]
    artifacts = {key: [{"name": f"a/{key}", "uri": f"gs://b/{key}", "type": {"schemaTitle": "tfx.Examples"}}]
                 for key in trainer.inputs("artifacts")}
    built = {backend.name: driver.container_input(trainer, {}, artifacts, "gs://b/root/task", "p", backend)
             for backend in (VERTEX, KUBEFLOW)}
    kfp_inputs = built["kubeflow"]["inputs"]["artifacts"]
    assert {a["type"].get("instanceSchema") for v in kfp_inputs.values() for a in v["artifacts"]} == {""}
    assert "executor-logs" in built["kubeflow"]["outputs"]["artifacts"]
    assert "executor-logs" not in built["vertex"]["outputs"]["artifacts"]
    assert all(a["type"] == {"schemaTitle": "tfx.Examples"}
               for v in built["vertex"]["inputs"]["artifacts"].values() for a in v["artifacts"])


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Run 1 pushes; one row more lands in the bucket and run 2 trains and compares with run 1's model; run 3,
    with nothing changed since, stops after its Snapshot."""
    from pipeline.dryrun.run import dry_run

    config = load_config(KUBEFLOW_YAML, SHORT)
    local_dir, out = tmp_path_factory.mktemp("kfdry"), io.StringIO()
    result = dry_run(config, local_dir, stream=out)
    data = Path(result.bucket.local(config.data.input_dir)) / "penguins.csv"
    lines = data.read_text().splitlines(keepends=True)
    data.write_text("".join(lines + lines[1:2]))
    for _ in range(2):
        result.runs += dry_run(config, local_dir, stream=out).runs
    return config, result, out.getvalue()


@pytest.mark.e2e
def test_two_dry_runs_as_the_open_source_backend_push_then_compare_with_the_serving_model(two_runs):
    config, result, console = two_runs
    first, second, third = result.runs
    assert "dry run of the open-source Kubeflow Pipelines backend" in console
    assert all(t.state == "ran" for t in first.tasks), [(t.name, t.state) for t in first.tasks]
    assert first.summary.blessed is True and first.summary.pushed_path, console
    assert not first.custom_jobs  # the Trainer runs in its own task: no Vertex training service
    served = second.task("ServingModel").outputs.artifacts["model"]
    assert [a["metadata"]["serving_version"] for a in served] == [first.summary.pushed_version], console
    assert "sparse_categorical_accuracy" in second.summary.baseline_metrics
    # Artifact names as the backend gives them: no Vertex metadata store in them.
    names = [a["name"] for a in first.task("Pusher").outputs.artifacts["pushed_model"]]
    assert names and all(n.startswith(f"namespaces/{config.kubeflow.namespace}/") for n in names), names
    assert "report:    " in console
    # Nothing changed since run 2: its condition is false and nothing after the Snapshot runs (exit 4).
    assert {t.name: t.state for t in third.tasks} == {
        "RunLease": "ran", "Snapshot": "ran", "condition-1": "not triggered", "tfx-dag": "ran",
        "ReleaseRunLease": "ran"}, [(t.name, t.state) for t in third.tasks]
    assert third.summary.nothing_new and third.summary.pushed_path is None


@pytest.mark.e2e
def test_the_pushed_model_scores_the_raw_rows(two_runs):
    import tensorflow as tf
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    from tests.vertex_support import raw_example

    config, result, _ = two_runs
    schema = text_format.Parse(Path(result.bucket.local(config.data.schema_file)).read_text(), schema_pb2.Schema())
    rows = list(csv.DictReader(open(Path(result.bucket.local(config.data.input_dir)) / "penguins.csv")))
    serve = tf.saved_model.load(result.runs[0].summary.pushed_path).signatures["serving_default"]
    predicted = serve(examples=tf.constant([raw_example(r, schema, config).SerializeToString() for r in rows]))
    truth = [row[config.features.label].encode() for row in rows]
    accuracy = sum(p == t for p, t in zip(predicted["class_name"].numpy().tolist(), truth)) / len(truth)
    assert accuracy >= 0.9, accuracy

