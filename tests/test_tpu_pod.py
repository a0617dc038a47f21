"""The trainer as a TPU pod's client, as far as it runs without a TPU: trainer.tpu, the resolver TensorFlow
builds from the pod's hosts, the environment a pod sets and the client needs, and the job's GCS paths."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from pydantic import ValidationError

from trainer import pod
from trainer.cli import JobConfig
from trainer.config import TrainerConfig
from trainer.errors import StrategyError
from trainer.strategy import make_strategy, tpu_resolver

# What GKE sets in each container of a 4-host TPU slice (the hosts in worker order).
POD_HOSTS = "tpu-w-0.tpu-svc,tpu-w-1.tpu-svc,tpu-w-2.tpu-svc,tpu-w-3.tpu-svc"
GCS = "gs://penguin-bucket"
GCS_JOB = {"train_files": f"{GCS}/xf/Split-train/*", "eval_files": f"{GCS}/xf/Split-eval/*",
           "checkpoint_dir": f"{GCS}/ckpt/run-1", "export_dir": f"{GCS}/export/run-1", "logdir": f"{GCS}/logs/run-1"}


@pytest.fixture
def env(monkeypatch):
    """The process environment, without any TPU or pod variable this machine might have."""
    for name in (pod.HOSTNAMES_ENV, pod.WORKER_ID_ENV, pod.LOAD_LIBRARY_ENV, *pod.PJRT_ENV_NAMES, "TPU_NAME",
                 "TPU_ACCELERATOR_TYPE"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize("value", ["local", "hosts", "penguin-pod", "grpc://10.128.0.7:8470",
                                   "grpc://10.128.0.7:8470,grpc://10.128.0.8:8470"])
def test_trainer_tpu_takes_the_vm_a_name_or_the_hosts(value):
    assert TrainerConfig(tpu=value).tpu == value


@pytest.mark.parametrize("value", ["10.128.0.7:8470", "grpc://10.128.0.7", "grpc://h:8470,10.0.0.2:8470",
                                   "grpc://h:99999", "Penguin_Pod", ""])
def test_trainer_tpu_refuses_what_names_no_tpu(value):
    with pytest.raises(ValidationError, match=r"tpu\n.*expected 'local' \(this VM's TPU\), 'hosts'"):
        TrainerConfig(tpu=value)


def test_the_resolver_of_a_host_list_gives_one_worker_task_per_host(env):
    env.setenv(pod.LOAD_LIBRARY_ENV, "0")
    resolver = tpu_resolver("grpc://10.128.0.7:8470,grpc://10.128.0.8:8470,grpc://10.128.0.9:8470")
    assert resolver.cluster_spec().as_dict() == {"worker": ["10.128.0.7:8470", "10.128.0.8:8470", "10.128.0.9:8470"]}
    # This process drives them all: TensorFlow's master is the first host's TPU worker.
    assert resolver.master() == "grpc://10.128.0.7:8470"
    assert (resolver.task_type, resolver.task_id) == ("worker", 0)
    # The VM's own chips: no cluster at all, one host.
    assert tpu_resolver("local").cluster_spec().as_dict() == {}


def test_the_host_list_comes_from_the_variables_a_pod_sets(env):
    env.setenv(pod.HOSTNAMES_ENV, POD_HOSTS)
    env.setenv(pod.WORKER_ID_ENV, "0")
    env.setenv(pod.LOAD_LIBRARY_ENV, "0")
    hosts = POD_HOSTS.split(",")
    assert pod.hosts_from_env() == ",".join(f"grpc://{h}:8470" for h in hosts)
    assert tpu_resolver("hosts").cluster_spec().as_dict() == {"worker": [f"{h}:8470" for h in hosts]}
    assert pod.grpc_hosts(["10.0.0.2:8471", " 10.0.0.3"]) == "grpc://10.0.0.2:8471,grpc://10.0.0.3:8470"


def test_only_worker_0_is_the_client(env):
    env.setenv(pod.HOSTNAMES_ENV, POD_HOSTS)
    env.setenv(pod.WORKER_ID_ENV, "2")
    with pytest.raises(StrategyError, match=r"TPU_WORKER_ID=2: the pod's client runs on worker 0 only"):
        pod.hosts_from_env()
    env.delenv(pod.HOSTNAMES_ENV)
    env.setenv(pod.WORKER_ID_ENV, "0")
    with pytest.raises(StrategyError, match=r"trainer.tpu=hosts but TPU_WORKER_HOSTNAMES is not set"):
        pod.hosts_from_env()
    env.setenv(pod.HOSTNAMES_ENV, "tpu-w-0,bad host")
    with pytest.raises(StrategyError, match=r"'bad host' is not a host name"):
        pod.hosts_from_env()


@pytest.mark.skipif(os.path.exists("/dev/accel0"), reason="this machine has a TPU")
def test_one_host_of_a_multi_host_slice_refuses_to_train_alone(env):
    # What made a 2x4 slice on ct5lp-hightpu-4t fail: each host's tpu=local trainer, all chiefs of one export.
    env.setenv(pod.HOSTNAMES_ENV, POD_HOSTS)
    env.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-16")
    with pytest.raises(StrategyError, match=r"trainer.tpu=local, but this VM is one of the 4 hosts of a TPU slice "
                                            r"\(TPU_WORKER_HOSTNAMES\): each would train on its own. Run one client"):
        make_strategy("auto", required_accelerator="tpu")
    assert pod.local_slice_problem({pod.HOSTNAMES_ENV: "tpu-w-0"}) is None  # a single-host slice lists itself


def test_a_client_that_would_load_libtpu_is_refused_before_connecting(env):
    # Without TPU_LOAD_LIBRARY=0 the client would take the chips the pod's TPU runtime serves on this host.
    with pytest.raises(StrategyError, match=r"TPU_LOAD_LIBRARY must be 0 on a TPU pod's client"):
        make_strategy("auto", "grpc://10.128.0.7:8470,grpc://10.128.0.8:8470", required_accelerator="tpu")
    env.setenv(pod.LOAD_LIBRARY_ENV, "0")
    env.setenv("NEXT_PLUGGABLE_DEVICE_USE_C_API", "true")
    with pytest.raises(StrategyError, match=r"unset NEXT_PLUGGABLE_DEVICE_USE_C_API on a TPU pod's client"):
        make_strategy("tpu", "penguin-pod")


def test_python_m_trainer_sets_tpu_load_library_from_the_job_before_tensorflow(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"trainer": {"tpu": "penguin-pod"}, **GCS_JOB}))
    environ: dict[str, str] = {}
    pod.prepare_from_argv(["train", "--cpu-devices", "2", str(job)], environ)  # what trainer/__main__.py passes
    assert environ == {pod.LOAD_LIBRARY_ENV: "0"} and pod.client_problem(environ) is None
    # A value already set is kept (then refused by the strategy, naming it), never silently replaced.
    environ = {pod.LOAD_LIBRARY_ENV: "1"}
    pod.prepare_from_argv(["train", str(job)], environ)
    assert pod.client_problem(environ).startswith("TPU_LOAD_LIBRARY must be 0")
    # The VM's own TPU, and other commands, leave the environment alone.
    job.write_text(yaml.safe_dump({"trainer": {"tpu": "local"}, **GCS_JOB}))
    for argv in (["train", str(job)], ["synthesize", "--out", str(tmp_path)]):
        environ = {}
        pod.prepare_from_argv(argv, environ)
        assert environ == {}
    # trainer/__main__.py runs it before importing trainer.cli: trainer.pod itself must not start TensorFlow.
    probe = "import sys, trainer.pod; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_a_pod_job_keeps_data_checkpoints_export_and_summaries_on_gcs():
    assert JobConfig.model_validate({"trainer": {"tpu": "penguin-pod"}, **GCS_JOB, "result_file": "/tmp/r.json"})
    for field in ("train_files", "eval_files", "checkpoint_dir", "export_dir", "logdir"):
        with pytest.raises(ValidationError, match=f"{field} must be a gs:// URI when trainer.tpu names a TPU pod"):
            JobConfig.model_validate({"trainer": {"tpu": "penguin-pod"}, **GCS_JOB, field: "/tmp/x"})
    # On the VM's own TPU, local paths are fine.
    assert JobConfig.model_validate({**GCS_JOB, "checkpoint_dir": "/tmp/ckpt"})
