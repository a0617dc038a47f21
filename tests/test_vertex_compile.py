"""The compiled Vertex PipelineJob: accepted by the real aiplatform client, with the
Trainer as a TPU CustomJob and Beam on Dataflow, all from config and offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline.config import load_config
from pipeline.dag.beam import beam_pipeline_args
from pipeline.dag.vertex_training import trainer_class, trainer_custom_config
from pipeline.errors import ConfigError
from tests.vertex_support import (
    BUCKET,
    DATAFLOW_SA,
    PROJECT,
    compiled_template,
    pipeline_tasks,
    task_executor,
    vertex_config,
)

BEAM_TASKS = ["CsvExampleGen", "StatisticsGen", "Transform", "Evaluator"]


@pytest.fixture(scope="module")
def spec():
    return json.loads(compiled_template().read_text())


def task_custom_config(spec: dict, task: str = "Trainer") -> dict:
    params = pipeline_tasks(spec["pipelineSpec"])[task]["inputs"]["parameters"]
    return json.loads(params["custom_config"]["runtimeValue"]["constantValue"]["stringValue"])


def test_aiplatform_accepts_the_compiled_json_offline():
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    config = vertex_config()
    aiplatform.init(project=PROJECT, location="us-central1", credentials=AnonymousCredentials())
    job = aiplatform.PipelineJob(display_name="t", template_path=str(compiled_template()),
                                 pipeline_root=config.pipeline.pipeline_root, enable_caching=False)
    resource = job.to_dict()  # the PipelineJob proto the client would send
    assert resource["runtimeConfig"]["gcsOutputDirectory"] == f"gs://{BUCKET}/root/pipeline_root/penguin-tpu"
    tasks = pipeline_tasks(resource["pipelineSpec"])
    assert {"RunLease", "CsvExampleGen", "Transform", "Trainer", "Evaluator", "Pusher"} <= set(tasks)
    assert all(not t["cachingOptions"].get("enableCache", False) for t in tasks.values())
    assert set(resource["pipelineSpec"]["root"]["dag"]["tasks"]) == {"tfx-dag", "ReleaseRunLease"}


def test_every_task_runs_the_pipeline_image(spec):
    image = vertex_config().vertex.pipeline_image
    executors = spec["pipelineSpec"]["deploymentSpec"]["executors"].values()
    images = {e["container"]["image"] for e in executors if "container" in e}
    assert images == {image}


def test_trainer_task_is_a_vertex_tpu_custom_job(spec):
    custom = task_custom_config(spec)
    assert custom["ai_platform_enable_vertex"] is True
    assert custom["ai_platform_vertex_region"] == "us-central1"
    args = custom["ai_platform_training_args"]
    assert args["project"] == PROJECT
    pools = args["job_spec"]["worker_pool_specs"]
    assert pools == [{"machine_spec": {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"},
                      "replica_count": 1,
                      "container_spec": {"image_uri": vertex_config().vertex.trainer_image, "env": [
                          {"name": "NEXT_PLUGGABLE_DEVICE_USE_C_API", "value": "true"},
                          {"name": "TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "value": "/lib/libtpu.so"}]}}]
    assert args["job_spec"]["service_account"] == "penguin-training@my-gcp-project.iam.gserviceaccount.com"
    # The strategy follows the machine; checkpoints stay in the gs:// model_run dir.
    assert custom["trainer"]["strategy"] == "tpu" and custom["trainer"]["require_accelerator"] == "tpu"
    assert custom["trainer"]["checkpoint_dir"] is None
    executor = task_executor(spec, "Trainer")
    assert "tfx.extensions.google_cloud_ai_platform.trainer.executor.GenericExecutor" in executor["args"]


def test_tfx_turns_the_trainer_config_into_a_valid_custom_job(spec, tmp_path, monkeypatch):
    """TFX's own Vertex client builds the CustomJob from our custom_config; the v1 proto must accept it."""
    from google.cloud.aiplatform_v1.types import CustomJob
    from tfx.extensions.google_cloud_ai_platform.training_clients import VertexJobClient

    # The client wants Application Default Credentials at construction; a dummy
    # user credential loads offline and is never used (no request is sent).
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": "authorized_user", "client_id": "x", "client_secret": "x",
                               "refresh_token": "x"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    custom = task_custom_config(spec)
    args = dict(custom["ai_platform_training_args"])
    args.pop("project")
    client = VertexJobClient(custom["ai_platform_vertex_region"])
    job = client.create_training_job({}, {}, {"custom_config": "{}"}, "x.Executor", args, None, None)
    proto = CustomJob(job)
    pool = proto.job_spec.worker_pool_specs[0]
    assert pool.machine_spec.machine_type == "ct5lp-hightpu-4t" and pool.machine_spec.tpu_topology == "2x2"
    assert pool.container_spec.command[:3] == ["python", "-m", "tfx.scripts.run_executor"]
    # The PJRT runtime variables survive into the CustomJob TFX sends.
    assert {e.name: e.value for e in pool.container_spec.env} == {
        "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so", "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true"}
    assert proto.labels["app"] == "penguin-tpu"


@pytest.mark.parametrize("task", BEAM_TASKS)
def test_beam_tasks_run_on_dataflow_with_the_pipeline_image(spec, task):
    config = vertex_config()
    args = task_executor(spec, task)["args"]
    expected = {
        "--runner=DataflowRunner", f"--project={PROJECT}", "--region=us-central1",
        f"--temp_location=gs://{BUCKET}/root/tmp/dataflow/temp",
        f"--staging_location=gs://{BUCKET}/root/tmp/dataflow/staging",
        "--machine_type=n1-standard-4", "--max_num_workers=10",
        f"--service_account_email={DATAFLOW_SA}",
        f"--sdk_container_image={config.vertex.pipeline_image}", "--experiments=use_runner_v2",
        "--no_use_public_ips", "--subnetwork=regions/us-central1/subnetworks/penguin-dataflow",
        "--labels=env=prod"}
    assert expected <= set(args)
    assert not any(a.startswith("--direct_") for a in args)


PJRT = {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so", "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true"}


@pytest.mark.parametrize("preset,machine_spec,image,env,accelerator", [
    ("tpu_v5e", {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"}, "trainer_image", PJRT, "tpu"),
    # v2/v3 run the StreamExecutor runtime: the PJRT variables would switch it off.
    ("tpu_v3", {"machine_type": "cloud-tpu", "accelerator_type": "TPU_V3", "accelerator_count": 8},
     "trainer_image", {}, "tpu"),
    ("tpu_v2", {"machine_type": "cloud-tpu", "accelerator_type": "TPU_V2", "accelerator_count": 8},
     "trainer_image", {}, "tpu"),
    ("gpu", {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1},
     "gpu_image", {}, "gpu"),
    ("cpu", {"machine_type": "n1-standard-8"}, "pipeline_image", {}, None),
])
def test_worker_pool_presets(preset, machine_spec, image, env, accelerator):
    config = vertex_config(f"vertex.worker_pool.preset={preset}")
    custom = trainer_custom_config(config)
    pool = custom["ai_platform_training_args"]["job_spec"]["worker_pool_specs"][0]
    assert pool["machine_spec"] == machine_spec
    # TPU machines get the TPU build of TF, GPU machines the CUDA build.
    assert pool["container_spec"]["image_uri"] == getattr(config.vertex, image)
    assert {e["name"]: e["value"] for e in pool["container_spec"].get("env", [])} == env
    assert custom["trainer"]["strategy"] == ("tpu" if preset.startswith("tpu") else "default")
    assert custom["trainer"]["require_accelerator"] == accelerator
    # A TPU slice is one system: a restarted worker restarts the whole job, which resumes from its checkpoint.
    job_spec = custom["ai_platform_training_args"]["job_spec"]
    assert job_spec.get("scheduling") == ({"restart_job_on_worker_restart": True} if accelerator == "tpu" else None)


def test_multi_worker_gpu_pool_gets_workers_strategy_and_restart():
    config = vertex_config("vertex.worker_pool.preset=gpu", "vertex.worker_pool.accelerator_count=4",
                           "vertex.worker_pool.extra_workers=2")
    custom = trainer_custom_config(config)
    job_spec = custom["ai_platform_training_args"]["job_spec"]
    assert [p["replica_count"] for p in job_spec["worker_pool_specs"]] == [1, 2]
    assert job_spec["worker_pool_specs"][1]["machine_spec"]["accelerator_count"] == 4
    assert job_spec["scheduling"] == {"restart_job_on_worker_restart": True}
    assert custom["trainer"]["strategy"] == "multi_worker"
    assert trainer_custom_config(vertex_config("vertex.worker_pool.preset=gpu",
                                               "vertex.worker_pool.accelerator_count=4"))[
        "trainer"]["strategy"] == "mirrored"


def test_strategy_contradicting_the_machine_is_rejected():
    with pytest.raises(ConfigError, match=r"trainer.strategy='mirrored' does not fit .*tpu_v5e.*'tpu'"):
        trainer_custom_config(vertex_config("trainer.strategy=mirrored"))


@pytest.mark.parametrize("override,message", [
    ("pipeline.root=output", r"pipeline.root must be a gs:// URI"),
    ("data.input_dir=data/penguins", r"data.input_dir must be a gs:// URI"),
    ("trainer.checkpoint_dir=/tmp/ckpt", r"trainer.checkpoint_dir must be a gs:// URI"),
    ("vertex.pipeline_image=gcr.io/p/pipeline", r"vertex.pipeline_image.*pinned by tag or digest"),
    ("vertex.trainer_image=gcr.io/p/pipeline:latest", r"vertex.trainer_image.*pinned by tag or digest"),
    ("vertex.service_account=someone@gmail.com", r"vertex.service_account.*service account email"),
    ("vertex.project=Bad_Project", r"vertex.project.*GCP project id"),
    ("vertex.labels={Env: prod}", r"vertex.labels.*label key"),
    ("vertex.worker_pool.extra_workers=1", r"vertex.worker_pool.*one TPU host"),
    ("vertex.worker_pool.preset=tpu_v6e", r"vertex.worker_pool.preset"),
    # A preset never silently trains on CPU: gpu needs the CUDA image, TPUs the TPU image.
    ("vertex.gpu_image=null", None),
    ("vertex.trainer_image=null", r"preset tpu_v5e runs vertex.trainer_image, which is not set.*libtpu"),
    ("vertex.worker_pool.accelerator_type=NVIDIA_TESLA_T4",
     r"preset tpu_v5e takes no accelerator_type .*pick the preset of the machine you want"),
])
def test_bad_vertex_settings_are_named(override, message):
    if message is None:  # fine on its own; see the next test
        vertex_config(override)
        return
    with pytest.raises(ConfigError, match=message):
        vertex_config(override)


@pytest.mark.parametrize("overrides,message", [
    (["vertex.worker_pool.preset=gpu", "vertex.gpu_image=null"],
     r"preset gpu runs vertex.gpu_image, which is not set; .*no CUDA libraries.*train on CPU"),
    (["vertex.worker_pool.preset=tpu_v3", "vertex.worker_pool.accelerator_type=NVIDIA_TESLA_V100"],
     r"accelerator_type NVIDIA_TESLA_V100 does not fit preset tpu_v3 \(expects TPU_V3...\)"),
    (["vertex.worker_pool.preset=cpu", "vertex.worker_pool.accelerator_count=2"], r"preset cpu takes no"),
])
def test_presets_refuse_machines_they_cannot_run_on(overrides, message):
    with pytest.raises(ConfigError, match=message):
        vertex_config(*overrides)
    # An explicit worker_pool.image takes the preset's image's place.
    if "vertex.gpu_image=null" in overrides:
        image = "us-central1-docker.pkg.dev/p/penguin/custom-cuda:1"
        assert vertex_config(*overrides, f"vertex.worker_pool.image={image}").vertex.trainer_container_image == image


@pytest.mark.parametrize("overrides,message", [
    # The default ct5lp-hightpu-4t holds 2x2; 2x4 there is two hosts, each of which would start its own trainer.
    (["vertex.worker_pool.tpu_topology=2x4"],
     r"vertex\.worker_pool\.tpu_topology 2x4 on ct5lp-hightpu-4t is a slice of 2 hosts \(2x2 per host\), but Vertex "
     r"AI runs TensorFlow on one TPU host only .*; on one host, 2x4 needs vertex\.worker_pool\.machine_type "
     r"ct5lp-hightpu-8t; to use more than one host, .*docs/trainer\.md#running-on-a-tpu-pod"),
    (["vertex.worker_pool.machine_type=ct5lp-hightpu-8t", "vertex.worker_pool.tpu_topology=4x4"],
     r"4x4 on ct5lp-hightpu-8t is a slice of 2 hosts .*no v5litepod machine holds 16 chips on one host \(the "
     r"largest, ct5lp-hightpu-8t, holds 2x4\).*running-on-a-tpu-pod"),
    (["vertex.worker_pool.tpu_topology=1x1"],
     r"tpu_topology 1x1 does not fit ct5lp-hightpu-4t, whose one host is 2x2; for 1x1 use "
     r"vertex\.worker_pool\.machine_type ct5lp-hightpu-1t"),
    (["vertex.worker_pool.machine_type=ct5lp-hightpu-16t"],
     r"machine_type 'ct5lp-hightpu-16t' is not a TPU v5litepod machine of this preset; use one of ct5lp-hightpu-1t"),
    (["vertex.worker_pool.preset=tpu_v3", "vertex.worker_pool.accelerator_count=32"],
     r"accelerator_count 32 on cloud-tpu is a v3-32 pod slice of 4 hosts \(8 cores per host\), but Vertex AI runs "
     r"TensorFlow on one TPU host only .*use accelerator_count 8 \(v3-8\), or .*running-on-a-tpu-pod"),
    (["trainer.tpu=grpc://10.0.0.2:8470,grpc://10.0.0.3:8470"],
     r"trainer\.tpu='grpc://10\.0\.0\.2:8470,grpc://10\.0\.0\.3:8470' names a TPU pod, which the vertex Trainer "
     r"does not drive.*python -m trainer"),
])
def test_tpu_pools_beyond_one_host_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        vertex_config(*overrides)


@pytest.mark.parametrize("machine,topology,cores", [
    ("ct5lp-hightpu-1t", "1x1", 1), ("ct5lp-hightpu-4t", "2x2", 4), ("ct5lp-hightpu-8t", "2x4", 8)])
def test_each_v5e_machine_takes_its_one_host_topology(machine, topology, cores):
    from pipeline.sections.presets import tpu_cores

    pool = vertex_config(f"vertex.worker_pool.machine_type={machine}",
                         f"vertex.worker_pool.tpu_topology={topology}").vertex.worker_pool
    assert pool.machine_spec == {"machine_type": machine, "tpu_topology": topology}
    assert tpu_cores(pool.spec, pool.machine_spec) == cores


def test_dataflow_disabled_keeps_beam_in_the_step_container():
    config = vertex_config("dataflow.enabled=false")
    assert beam_pipeline_args(config) == config.beam.args
    assert not any("Dataflow" in a for a in beam_pipeline_args(config))


def test_the_compiled_spec_names_no_path_of_the_compiling_checkout():
    # A path of this machine would be absent in the image and part of every Beam task's cache key.
    from pipeline.config import REPO_ROOT

    text = compiled_template("dataflow.enabled=false").read_text()
    assert str(REPO_ROOT) not in text
    assert "--requirements_file=requirements.lock" in text


def test_dataflow_options_reach_the_args():
    args = beam_pipeline_args(vertex_config(
        "dataflow.use_public_ips=true", "dataflow.subnetwork=regions/us-central1/subnetworks/private",
        "beam.extra_args=[--number_of_worker_harness_threads=4]"))
    assert "--no_use_public_ips" not in args
    assert "--subnetwork=regions/us-central1/subnetworks/private" in args
    assert args[-1] == "--number_of_worker_harness_threads=4"


@pytest.mark.parametrize("overrides,message", [
    (["dataflow.subnetwork=null"], r"dataflow.use_public_ips is false but no dataflow.subnetwork is set: "
                                   r"workers without public IPs reach .* only through Private Google Access"),
    (["dataflow.service_account=null"], r"dataflow.service_account is required: .*roles/dataflow.worker"),
    (["dataflow.subnetwork=regions/europe-west4/subnetworks/penguin-dataflow"],
     r"dataflow.subnetwork .* is not in vertex.region 'us-central1'"),
])
def test_dataflow_settings_that_would_fail_every_job_are_rejected(overrides, message):
    with pytest.raises(ConfigError, match=message):
        vertex_config(*overrides)


def test_public_ips_need_no_subnetwork_and_terraforms_self_link_is_accepted():
    assert "--subnetwork" not in " ".join(beam_pipeline_args(vertex_config(
        "dataflow.subnetwork=null", "dataflow.use_public_ips=true")))
    link = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/regions/us-central1/subnetworks/penguin-dataflow"
    config = vertex_config(f"dataflow.subnetwork={link}")
    assert config.dataflow.subnetwork_parts(PROJECT) == (PROJECT, "us-central1", "penguin-dataflow")


def test_dataflow_without_vertex_is_rejected():
    with pytest.raises(ConfigError, match="dataflow needs a vertex section"):
        load_config("configs/local.yaml", ["dataflow.enabled=true"])


def test_local_config_keeps_the_local_trainer_and_direct_runner():
    from tfx import v1 as tfx

    config = load_config("configs/local.yaml")
    assert trainer_class(config) is tfx.components.Trainer
    assert beam_pipeline_args(config) == config.beam.args
    assert set(trainer_custom_config(config)) == {"trainer"}


def test_make_compile_needs_no_network(tmp_path):
    """The CLI in a fresh process, with every route to Google made unreachable."""
    out = tmp_path / "spec.json"
    dead = "127.0.0.1:9"  # discard port: nothing listens
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "PYTHONPATH": os.getcwd(),
           "HTTP_PROXY": f"http://{dead}", "HTTPS_PROXY": f"http://{dead}", "NO_PROXY": "",
           "GCE_METADATA_HOST": dead, "GCE_METADATA_IP": dead, "NO_GCE_CHECK": "True",
           "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json")}
    result = subprocess.run([sys.executable, "-m", "pipeline", "compile", "--config", "configs/vertex.yaml",
                             "-o", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"wrote {out}" in result.stdout
    assert json.loads(out.read_text())["pipelineSpec"]["pipelineInfo"]["name"] == "penguin-tpu"


def test_compile_rejects_a_config_without_vertex(capsys):
    from pipeline.cli import main
    from pipeline.errors import EXIT_BAD_CONFIG

    assert main(["compile", "--config", "configs/local.yaml"]) == EXIT_BAD_CONFIG
    assert "compile needs a vertex section" in capsys.readouterr().err


@pytest.mark.parametrize("overrides", [(), ("data.spans=window(2)",)], ids=["flat", "spans"])
def test_everything_after_the_snapshot_is_one_task_conditional_on_the_snapshots_output_parameter(overrides):
    """data.skip_when_no_new_span on Vertex (pipeline/dag/conditions.py), flat source or spans: TFX writes the
    condition on every task after the Snapshot as an artifact test; compile regroups them into one sub-DAG task
    whose condition reads the Snapshot's output parameter, as the KFP SDK compiles dsl.If
    (pipeline/spec/condition_group.py)."""
    from pipeline.spec.compile import DECISION
    from pipeline.spec.condition_group import GROUP_COMPONENT, GROUP_TASK, channel, task_dag

    spec = json.loads(compiled_template(*overrides).read_text())["pipelineSpec"]
    root = task_dag(spec)["tasks"]
    assert set(root) == {"RunLease", "Snapshot", GROUP_TASK}
    group = root[GROUP_TASK]
    key = channel("Snapshot", "new_data")
    assert group["triggerPolicy"]["condition"] == f"int(inputs.parameter_values['{key}']) == 1"
    assert group["triggerPolicy"]["condition"] == DECISION.parameter_condition()
    assert group["inputs"]["parameters"][key] == {"taskOutputParameter": {"producerTask": "Snapshot",
                                                                          "outputParameterKey": "new_data"}}
    assert spec["components"][GROUP_COMPONENT]["inputDefinitions"]["parameters"][key] == {"type": "INT"}
    snapshot = spec["components"][root["Snapshot"]["componentRef"]["name"]]
    assert snapshot["outputDefinitions"]["parameters"] == {"new_data": {"parameterType": "NUMBER_INTEGER"}}
    assert "new_data" in snapshot["outputDefinitions"]["artifacts"]  # TFX's entrypoint writes it from this
    assert group["dependentTasks"] == ["RunLease", "Snapshot"] and group["componentRef"]["name"] == GROUP_COMPONENT
    children = spec["components"][GROUP_COMPONENT]["dag"]["tasks"]
    assert len(children) >= 9 and not [n for n, t in children.items() if "triggerPolicy" in t]
    for name, child in children.items():
        assert "Snapshot" not in child.get("dependentTasks", []), name
        for source in child.get("inputs", {}).get("artifacts", {}).values():
            assert source.get("taskOutputArtifact", {}).get("producerTask") != "Snapshot", name
    # With the check off there is no condition at all.
    off = json.loads(compiled_template(*overrides, "data.skip_when_no_new_span=false").read_text())["pipelineSpec"]
    assert GROUP_TASK not in task_dag(off)["tasks"]


def test_a_condition_other_than_the_dags_decision_is_not_grouped():
    """Only the one decision is rewritten into the SDK's parameter form; any other artifact condition would be a
    form with no precedent on a DAG task, so compile refuses it (fail closed)."""
    from pipeline.errors import ConditionGroupError
    from pipeline.spec.compile import DECISION
    from pipeline.spec.condition_group import group_conditions

    spec = {"root": {"dag": {"tasks": {
        "Snapshot": {"componentRef": {"name": "c"}},
        "B": {"componentRef": {"name": "c"}, "triggerPolicy": {
            "condition": "(inputs.artifacts['s'].artifacts[0].metadata['other'] == 1.0)"},
              "inputs": {"artifacts": {"s": {"taskOutputArtifact": {"producerTask": "Snapshot",
                                                                    "outputArtifactKey": "snapshot"}}}}}}}},
            "components": {"c": {"executorLabel": "e", "outputDefinitions": {"artifacts": {"snapshot": {}}}}}}
    with pytest.raises(ConditionGroupError, match="is not the DAG's decision"):
        group_conditions(spec, DECISION)


def _conditioned(condition: str) -> dict:
    return {"componentRef": {"name": "c"}, "triggerPolicy": {"condition": condition},
            "inputs": {"artifacts": {"s": {"taskOutputArtifact": {"producerTask": "A", "outputArtifactKey": "o"}}}}}


@pytest.mark.parametrize("tasks, error", [
    ({"A": {"componentRef": {"name": "c"}}, "B": _conditioned("inputs.artifacts['s'].artifacts[0].uri == 'x'"),
      "C": _conditioned("inputs.artifacts['s'].artifacts[0].uri == 'y'")}, "differ in their condition"),
    ({"A": {"componentRef": {"name": "c"}}, "B": _conditioned("inputs.artifacts['s'].artifacts[0].uri == 'x'"),
      "D": {"componentRef": {"name": "c"},
            "inputs": {"artifacts": {"m": {"taskOutputArtifact": {"producerTask": "B", "outputArtifactKey": "o"}}}}}},
     "task D reads B's output from inside the condition group"),
])
def test_conditions_that_do_not_fit_one_group_are_refused_naming_the_task(tasks, error):
    from pipeline.errors import ConditionGroupError
    from pipeline.spec.compile import DECISION
    from pipeline.spec.condition_group import group_conditions

    spec = {"root": {"dag": {"tasks": tasks}},
            "components": {"c": {"executorLabel": "e", "outputDefinitions": {"artifacts": {"o": {}}}}}}
    with pytest.raises(ConditionGroupError, match=error):
        group_conditions(spec, DECISION)


@pytest.mark.parametrize("overrides", [(), ("data.spans=window(2)", "trainer.warm_start=true")],
                         ids=["shipped", "spans-warm-start"])
def test_example_gen_reads_the_snapshot_artifact_and_the_baseline_is_the_model_serving_now(overrides):
    """No dynamic execution property (TFX 1.16 compiles one into a reference to a task that does not exist,
    which the spec rules refuse: tests/test_dryrun_rules.py) and no resolver task."""
    from pipeline.spec import model as spec_model
    from pipeline.spec.condition_group import channel

    pipeline = spec_model.read(json.loads(compiled_template(*overrides).read_text())["pipelineSpec"])
    tasks = {t.name: t for t in pipeline.tasks()}
    example_gen = tasks["CsvExampleGen"]
    assert "input_base" not in example_gen.inputs("parameters")
    snapshot = example_gen.inputs("artifacts")["snapshot"]
    assert snapshot in ({"taskOutputArtifact": {"producerTask": "Snapshot", "outputArtifactKey": "snapshot"}},
                        {"componentInputArtifact": channel("Snapshot", "snapshot")}), snapshot
    serving = {"producerTask": "ServingModel", "outputArtifactKey": "model"}
    assert tasks["Evaluator"].inputs("artifacts")["baseline_model"]["taskOutputArtifact"] == serving
    base = tasks["Trainer"].inputs("artifacts").get("base_model", {}).get("taskOutputArtifact")
    assert base == (serving if "trainer.warm_start=true" in overrides else None)


def assert_three_splits(pipeline_spec: dict, config) -> None:
    """ExampleGen writes train, eval and test as the config shares them; Transform transforms every split (TFX's
    default without splits_config); the Evaluator evaluates test, with Transform's output for the trivial model."""
    from pipeline.dag.splits import split_buckets
    from pipeline.spec import model as spec_model

    tasks = {t.name: t for t in spec_model.read(pipeline_spec).tasks()}

    def parameter(task: str, name: str) -> str:
        value = tasks[task].inputs("parameters")[name]["runtimeValue"]
        # PipelineSpec 2.1 (Kubeflow) writes `constant`; Vertex's 2.0 `constantValue.stringValue`.
        return value["constant"] if "constant" in value else value["constantValue"]["stringValue"]

    splits = json.loads(parameter("CsvExampleGen", "output_config"))["split_config"]["splits"]
    assert [(s["name"], s["hash_buckets"]) for s in splits] == list(split_buckets(config).items())
    assert [s["name"] for s in splits] == ["train", "eval", "test"]
    assert "splits_config" not in tasks["Transform"].inputs("parameters")
    assert json.loads(parameter("Evaluator", "example_splits")) == ["test"]
    transformed = tasks["Evaluator"].inputs("artifacts")["transformed_examples"]["taskOutputArtifact"]
    assert transformed == {"producerTask": "Transform", "outputArtifactKey": "transformed_examples"}


def test_the_compiled_spec_splits_three_ways_and_evaluates_on_test(spec):
    assert_three_splits(spec["pipelineSpec"], vertex_config())
