"""Strategy selection: the clear errors, and Vertex's CLUSTER_SPEC becoming TF_CONFIG."""

from __future__ import annotations

import json
import os

import pytest

from trainer.data import per_replica_batch_size
from trainer.errors import BatchSizeError, StrategyError
from trainer.strategy import make_strategy, require_accelerator, tf_config_from_vertex

# What Vertex AI sets on the first replica of a job with a chief pool and two workers.
VERTEX_CLUSTER_SPEC = {
    "cluster": {"workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
                "workerpool1": ["cmle-training-workerpool1-ab-0:2222", "cmle-training-workerpool1-ab-1:2222"]},
    "environment": "cloud",
    "task": {"type": "workerpool1", "index": 1, "trial": ""},
    "job": '{"python_module":"","package_uris":[],"job_args":[]}',
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    # setenv first so monkeypatch also undoes what make_strategy itself writes.
    for name in ("TF_CONFIG", "CLUSTER_SPEC", "TPU_NAME", "TPU_ACCELERATOR_TYPE"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


@pytest.mark.skipif(os.path.exists("/dev/accel0"), reason="this machine has a TPU")
def test_tpu_without_a_tpu_names_the_setting():
    with pytest.raises(StrategyError, match=r"trainer\.strategy=tpu but no TPU is attached"):
        make_strategy("tpu")


def _has_gpu() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
def test_a_gpu_job_without_a_gpu_refuses_to_train_on_cpu(caplog):
    with pytest.raises(StrategyError, match=r"require_accelerator=gpu but TensorFlow sees no GPU.*vertex\.gpu_image"):
        make_strategy("default", required_accelerator="gpu")
    assert "not training on CPU" in caplog.text  # logged as well as raised


@pytest.mark.skipif(os.path.exists("/dev/accel0"), reason="this machine has a TPU")
def test_a_tpu_job_without_a_tpu_refuses_whatever_the_strategy():
    with pytest.raises(StrategyError, match=r"require_accelerator=tpu but no TPU is attached"):
        make_strategy("auto", required_accelerator="tpu")


def test_no_requirement_trains_where_it_is():
    require_accelerator(None)
    assert make_strategy("default").num_replicas_in_sync == 1


@pytest.mark.parametrize("raw, problem", [
    ("{not json", "does not parse"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}}', "needs a 'cluster' mapping and a 'task' mapping"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 1}}',
     "task 'worker' index 1 is not in the cluster"),
])
def test_unparsable_tf_config_names_it(monkeypatch, raw, problem):
    monkeypatch.setenv("TF_CONFIG", raw)
    with pytest.raises(StrategyError, match="TF_CONFIG") as err:
        make_strategy("multi_worker")
    assert problem in str(err.value)


def test_auto_also_refuses_a_bad_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "[]")
    with pytest.raises(StrategyError, match="TF_CONFIG"):
        make_strategy("auto")


def test_multi_worker_without_cluster_says_what_is_missing():
    with pytest.raises(StrategyError, match=r"trainer\.strategy=multi_worker needs TF_CONFIG"):
        make_strategy("multi_worker")


def test_vertex_cluster_spec_translates_to_tf_config():
    assert tf_config_from_vertex(json.dumps(VERTEX_CLUSTER_SPEC)) == {
        "cluster": {"chief": ["cmle-training-workerpool0-ab-0:2222"],
                    "worker": ["cmle-training-workerpool1-ab-0:2222", "cmle-training-workerpool1-ab-1:2222"]},
        "task": {"type": "worker", "index": 1}}


def test_cluster_spec_alone_sets_tf_config(monkeypatch):
    # A one-machine Vertex job: auto picks the local strategy, TF_CONFIG is now set for TF.
    spec = {"cluster": {"workerpool0": ["localhost:2222"]}, "task": {"type": "workerpool0", "index": 0}}
    monkeypatch.setenv("CLUSTER_SPEC", json.dumps(spec))
    strategy = make_strategy("auto")
    assert strategy.num_replicas_in_sync == 1
    assert json.loads(os.environ["TF_CONFIG"]) == {"cluster": {"chief": ["localhost:2222"]},
                                                   "task": {"type": "chief", "index": 0}}


def test_bad_cluster_spec_is_named(monkeypatch):
    monkeypatch.setenv("CLUSTER_SPEC", json.dumps({"cluster": {"pool9": ["h:1"]}, "task": {}}))
    with pytest.raises(StrategyError, match="CLUSTER_SPEC"):
        make_strategy("auto")


def test_batch_must_split_over_replicas_and_micro_batches():
    assert per_replica_batch_size(32, 2, 4) == 4
    with pytest.raises(BatchSizeError, match=r"trainer\.gradient_accumulation_steps \(3\)"):
        per_replica_batch_size(32, 1, 3)
