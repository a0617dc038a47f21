"""The Tuner on Vertex without Google Cloud and without training: the HyperparameterTuningJob it builds from the
config (the Trainer's CustomJob spec, the space's parameter specs), sent and polled by the real aiplatform
JobServiceClient over REST to tests/fake_tuning.py (the dry run's stand-in), refused where the service refuses,
failed and cancelled jobs, and what a trial reads from Vertex's arguments."""

from __future__ import annotations

import json
import re
import threading

import pytest
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud.aiplatform_v1.types import HyperparameterTuningJob
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.errors import TuningFailed
from components.tuner import TRIAL_JOB_KEY, vertex_job
from components.tuner.trial import parse_values
from pipeline.dag.tuning import tuner_custom_config
from pipeline.dag.vertex_training import trainer_custom_config, vertex_extension
from tests import vertex_support as vs
from tests.fake_tuning import PARENT, FakeTuning
from trainer.features import CONFIG_KEY as FEATURES_KEY

SPACE = ("tuning.space={learning_rate: {min: 0.0001, max: 0.1, scale: log}, hidden_units: {values: [[16, 16], "
         "[64, 32]]}, global_batch_size: {values: [128, 256]}, train_steps: {min: 500, max: 2000, step: 500}, "
         "dropout: {min: 0.0, max: 0.3}}")


def _config(*overrides):
    return vs.vertex_config("tuning.trials=4", "tuning.parallel_trials=2", SPACE, *overrides)


def _inputs(tmp_path) -> dict:
    examples = standard_artifacts.Examples()
    examples.uri, examples.split_names = "gs://bucket/Transform/transformed_examples/7", '["train", "eval"]'
    graph, schema = standard_artifacts.TransformGraph(), standard_artifacts.Schema()
    graph.uri, schema.uri = "gs://bucket/Transform/transform_graph/7", "gs://bucket/ImportSchemaGen/schema/3"
    return {"examples": [examples], "transform_graph": [graph], "schema": [schema]}


def _properties(config) -> dict:
    custom = {FEATURES_KEY: config.features.model_dump(), **tuner_custom_config(config)}
    return {"custom_config": json.dumps(custom), "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs()),
            "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs())}, custom


@pytest.fixture
def stand_in(tmp_path):
    fake = FakeTuning(tmp_path / "stand-in")
    url = fake.start()
    client = vertex_job.job_client("us-central1", endpoint=url, transport="rest", credentials=AnonymousCredentials())
    yield fake, client
    fake.stop()


def test_the_trials_are_the_trainers_customjob_with_the_trial_command_and_the_space_as_parameter_specs(tmp_path):
    config = _config()
    props, custom = _properties(config)
    job = vertex_job.build_job(_inputs(tmp_path), props, custom)
    trainer_spec = trainer_custom_config(config)[vertex_extension().TRAINING_ARGS_KEY]["job_spec"]
    [pool] = job["trial_job_spec"]["worker_pool_specs"]
    [trainer_pool] = trainer_spec["worker_pool_specs"]
    # The same image, TPU machine and PJRT environment; only the command is the trial's, and no args of ours.
    assert pool["machine_spec"] == trainer_pool["machine_spec"] == {"machine_type": "ct5lp-hightpu-4t",
                                                                     "tpu_topology": "2x2"}
    assert pool["container_spec"]["image_uri"] == config.vertex.trainer_image
    assert pool["container_spec"]["env"] == trainer_pool["container_spec"]["env"]
    assert {e["name"] for e in pool["container_spec"]["env"]} == {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH",
                                                                  "NEXT_PLUGGABLE_DEVICE_USE_C_API"}
    assert job["trial_job_spec"]["service_account"] == config.vertex.training_service_account
    assert job["trial_job_spec"]["scheduling"] == trainer_spec["scheduling"]
    command = pool["container_spec"]["command"]
    assert command[:3] == ["python", "-m", "components.tuner.trial"] and "args" not in pool["container_spec"]
    trial_custom = json.loads(json.loads(command[command.index("--exec-properties") + 1])["custom_config"])
    assert TRIAL_JOB_KEY not in trial_custom and trial_custom["trainer"]["strategy"] == "tpu"
    assert job["max_trial_count"] == 4 and job["parallel_trial_count"] == 2 and job["max_failed_trial_count"] == 3
    assert job["study_spec"]["metrics"] == [{"metric_id": "accuracy", "goal": "MAXIMIZE"}]
    assert job["study_spec"]["algorithm"] == "RANDOM_SEARCH"
    specs = {p["parameter_id"]: p for p in job["study_spec"]["parameters"]}
    assert specs["learning_rate"] == {"parameter_id": "learning_rate", "scale_type": "UNIT_LOG_SCALE",
                                      "double_value_spec": {"min_value": 0.0001, "max_value": 0.1}}
    assert specs["hidden_units"] == {"parameter_id": "hidden_units",
                                     "categorical_value_spec": {"values": ["16,16", "64,32"]}}
    assert specs["global_batch_size"]["discrete_value_spec"] == {"values": [128.0, 256.0]}
    assert specs["train_steps"]["discrete_value_spec"] == {"values": [500.0, 1000.0, 1500.0, 2000.0]}
    assert specs["dropout"]["double_value_spec"] == {"min_value": 0.0, "max_value": 0.3}  # proto3 JSON drops the 0


def test_the_job_is_sent_polled_and_its_best_trial_becomes_the_record(tmp_path, stand_in, monkeypatch):
    import hypertune.hypertune

    # cloudml-hypertune's fallback file, where a HyperTune made without the trial's CLOUD_ML_HP_METRIC_FILE writes
    # (its default, /tmp/hypertune: two trials making that directory at once race on a fresh machine).
    default = tmp_path / "hypertune-default"
    monkeypatch.setattr(hypertune.hypertune, "_DEFAULT_METRIC_PATH", str(default / "output.metrics"))
    fake, client = stand_in
    fake.metric, fake.trial_seconds = "accuracy", 0.05
    fake.objective = lambda values: 1 / float(values["learning_rate"])  # the lowest rate wins
    props, custom = _properties(_config())
    found = vertex_job.tune(_inputs(tmp_path), props, custom, client=client, poll_seconds=0.02)
    [create] = [r for r in fake.requests if r.method == "POST"]
    assert create.path == f"/v1/{PARENT}/hyperparameterTuningJobs"
    sent = HyperparameterTuningJob.from_json(json.dumps(create.body))  # the client sends enums as numbers
    assert sent.max_trial_count == 4 and sent.study_spec.parameters[0].scale_type.name == "UNIT_LOG_SCALE"
    assert len([r for r in fake.requests if r.method == "GET"]) >= 2  # polled until it ended
    assert [t.state for t in found.trials] == ["COMPLETED"] * 4 and found.where.startswith(PARENT)
    rates = {t.id: t.values["learning_rate"] for t in found.trials}
    assert found.best == min(rates, key=rates.get)
    assert found.best_trial.objective == pytest.approx(1 / rates[found.best])
    # Vertex's values as our search values: a layer list as text, batch sizes and steps as integers.
    assert {type(v) for t in found.trials for v in (t.values["global_batch_size"], t.values["train_steps"])} == {int}
    assert all(t.values["hidden_units"] in ("16,16", "64,32") for t in found.trials)
    assert found.hours_are == "pool-hours" and found.replicas == 1 and found.best_trial.step == 40
    # The trials ran two at a time, each with Vertex's --<parameter_id>=<value> arguments.
    assert all(sorted(a.split("=")[0] for a in t.args) == ["--dropout", "--global_batch_size", "--hidden_units",
                                                           "--learning_rate", "--train_steps"] for t in fake.trials)
    assert all(0.0 <= float(t.values["dropout"]) <= 0.3 for t in fake.trials)
    assert not default.exists(), "a trial reported to cloudml-hypertune's default file, not the one Vertex gave it"


@pytest.mark.parametrize("breaks, field", [
    (lambda j: j["study_spec"]["parameters"][0]["double_value_spec"].update(min_value=0.0),
     "study_spec.parameters[0].scale_type: UNIT_LOG_SCALE: the entire feasible space must be strictly positive"),
    (lambda j: j["study_spec"]["parameters"][1].update(scale_type="UNIT_LINEAR_SCALE"),
     "study_spec.parameters[1].scale_type: leave unset for CATEGORICAL parameters"),
    (lambda j: j.update(max_trial_count=0), "max_trial_count: required: a positive count"),
    (lambda j: j.update(parallel_trial_count=9), "parallel_trial_count: above max_trial_count"),
    (lambda j: j["study_spec"]["parameters"][2]["discrete_value_spec"].update(values=[256.0, 128.0]),
     "study_spec.parameters[2].discrete_value_spec.values: must increase, at least 1e-10 apart"),
    (lambda j: j["study_spec"]["parameters"][0]["double_value_spec"].update(default_value=0.01),
     "study_spec.parameters[0].double_value_spec.default_value: not supported by HyperparameterTuningJob"),
    (lambda j: j["study_spec"]["metrics"][0].update(metric_id="eval auc"),
     "study_spec.metrics[0].metric_id: required, without whitespace"),
])
def test_the_stand_in_refuses_what_the_service_documents_naming_the_field(tmp_path, stand_in, breaks, field):
    fake, client = stand_in
    props, custom = _properties(_config())
    job = vertex_job.build_job(_inputs(tmp_path), props, custom)
    breaks(job)
    with pytest.raises(gexc.BadRequest) as refused:  # 400 INVALID_ARGUMENT, as the REST client raises it
        client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=job)
    assert field in refused.value.message and "study.proto" in refused.value.message or \
        "hyperparameter_tuning_job.proto" in refused.value.message
    assert not fake.trials


def test_too_many_failed_trials_fail_the_job_and_the_tuner_names_them(tmp_path, stand_in):
    fake, client = stand_in
    fake.objective = lambda values: 1 / 0
    props, custom = _properties(_config("tuning.max_failed_trials=2"))
    with pytest.raises(TuningFailed) as failed:
        vertex_job.tune(_inputs(tmp_path), props, custom, client=client, poll_seconds=0.02)
    text = str(failed.value)
    assert "ended JOB_STATE_FAILED" in text and re.search(r"[23] trial\(s\) failed \(max_failed_trial_count 2\)", text)
    assert "trial 1: The replica workerpool0-0 exited with a non-zero status of 1: division by zero" in text
    assert len(fake.trials) <= 3  # stopped at the limit, not run to max_trial_count


def test_a_trial_that_reports_no_objective_is_infeasible_and_loses(tmp_path, stand_in):
    fake, client = stand_in
    fake.metric = "accuracy"
    fake.objective = lambda values: None if values["hidden_units"] == "16,16" else 0.9
    props, custom = _properties(_config("tuning.max_failed_trials=4"))
    found = vertex_job.tune(_inputs(tmp_path), props, custom, client=client, poll_seconds=0.02)
    silent = [t for t in found.trials if t.values["hidden_units"] == "16,16"]
    assert silent and all(t.state == "FAILED" and "reported no 'accuracy' to CLOUD_ML_HP_METRIC_FILE" in t.error
                          for t in silent)
    assert found.best_trial.values["hidden_units"] == "64,32"


def test_a_stopped_tuner_cancels_its_job_and_the_trials_stop(tmp_path, stand_in):
    fake, client = stand_in
    fake.trial_seconds = 30  # trials that would run long
    props, custom = _properties(_config())
    job = vertex_job.build_job(_inputs(tmp_path), props, custom)
    created = client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=job)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()  # as SIGTERM would, while the job runs
    with pytest.raises(TuningFailed, match="ended JOB_STATE_CANCELLED: the job was cancelled"):
        vertex_job.wait(client, created.name, 0.02, stop.is_set)
    assert any(r.path.endswith(":cancel") for r in fake.requests)
    assert fake.trials and all(t.done.is_set() and t.error == "stopped" for t in fake.trials)


def test_a_trial_reads_its_values_from_vertex_arguments_and_refuses_others():
    keys = {"learning_rate", "hidden_units"}
    assert parse_values(["--learning_rate=0.01", "--hidden_units", "64,32"], keys) == {
        "learning_rate": "0.01", "hidden_units": "64,32"}
    with pytest.raises(ValueError, match="--seed: not a searched key"):
        parse_values(["--seed=3"], keys)
