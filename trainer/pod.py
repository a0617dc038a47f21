"""A TPU pod's client: what `trainer.tpu` may name, the gRPC list of a pod's hosts, and the client's environment
(plain Python: `python -m trainer` sets it before TensorFlow starts). Why: docs/internals.md."""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping, MutableMapping, Optional

import yaml

from trainer.errors import StrategyError

LOCAL = "local"  # the TPU attached to this VM: one host (TPUClusterResolver's own keyword)
HOSTS = "hosts"  # the pod's hosts, read from HOSTNAMES_ENV when the strategy starts
# Where docs/trainer.md describes the pod path; error messages point there.
POD_DOCS = "docs/trainer.md#running-on-a-tpu-pod"
# The TPU worker's gRPC port on every host of a pod runtime (tensorflow/python/tpu/client/client.py,
# _DEFAULT_ENDPOINT_PORT: what the resolver assumes for an address without one).
WORKER_PORT = 8470
# What GKE sets in each container of a multi-host TPU slice: every host's name, in worker order, and this one's index.
HOSTNAMES_ENV, WORKER_ID_ENV = "TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID"
# "0": this process drives the TPU hosts over gRPC and must not load libtpu itself (TryAcquireTpuLock in
# xla/stream_executor/tpu/tpu_initializer_helper.cc); the pod's TPU runtime owns the chips.
LOAD_LIBRARY_ENV = "TPU_LOAD_LIBRARY"
# The variables that make TF 2.16 load libtpu as a PJRT pluggable device on one host (the v5e preset sets them,
# pipeline/sections/presets.py PJRT_ENV); on a pod's client they would load libtpu.
PLUGGABLE_LIBRARY_ENV, PLUGGABLE_C_API_ENV = "TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "NEXT_PLUGGABLE_DEVICE_USE_C_API"
PJRT_ENV_NAMES = (PLUGGABLE_LIBRARY_ENV, PLUGGABLE_C_API_ENV)

_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # a Cloud TPU node name
_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
_ENDPOINT_RE = re.compile(r"^grpc://(?P<host>[^:/,]+):(?P<port>[0-9]{1,5})$")


def check_tpu(value: str) -> str:
    """trainer.tpu: `local`, `hosts`, a Cloud TPU name, or a comma-separated list of grpc://host:port."""
    if value in (LOCAL, HOSTS) or _NAME_RE.match(value):
        return value
    for endpoint in value.split(","):
        m = _ENDPOINT_RE.match(endpoint)
        if not m or not _HOST_RE.match(m["host"]) or not 0 < int(m["port"]) < 65536:
            raise ValueError(f"{value!r}: expected 'local' (this VM's TPU), 'hosts' (the pod's hosts from "
                             f"{HOSTNAMES_ENV}), a Cloud TPU name, or grpc://host:port[,grpc://host:port...]")
    return value


def is_remote(tpu: str) -> bool:
    """A TPU this process reaches over gRPC (a pod's hosts, or a TPU by name) rather than the VM's own chips."""
    return tpu != LOCAL


def grpc_hosts(hostnames: Iterable[str], port: int = WORKER_PORT) -> str:
    """The resolver's address list for a pod's hosts, in worker order: grpc://host:port,... A host that names
    its own port keeps it."""
    endpoints = []
    for host in (h.strip() for h in hostnames):
        name, _, own_port = host.partition(":")
        if not _HOST_RE.match(name) or (own_port and not own_port.isdigit()):
            raise StrategyError(f"{host!r} is not a host name or IP address (from {HOSTNAMES_ENV})")
        endpoints.append(f"grpc://{name}:{own_port or port}")
    if not endpoints:
        raise StrategyError(f"{HOSTNAMES_ENV} names no host")
    return ",".join(endpoints)


def hosts_from_env(environ: Mapping[str, str] = os.environ) -> str:
    """trainer.tpu=hosts: the gRPC list of the hosts a multi-host TPU slice lists in its environment.
    Refuses any worker but 0: the client runs once, there; the other hosts only serve their chips."""
    raw = environ.get(HOSTNAMES_ENV, "")
    if not raw.strip():
        raise StrategyError(f"trainer.tpu={HOSTS} but {HOSTNAMES_ENV} is not set: name the TPU (trainer.tpu: "
                            f"<tpu name>) or its hosts (grpc://host:{WORKER_PORT},...) instead ({POD_DOCS})")
    worker = environ.get(WORKER_ID_ENV, "0").strip() or "0"
    if worker != "0":
        raise StrategyError(f"{WORKER_ID_ENV}={worker}: the pod's client runs on worker 0 only, which drives "
                            f"every host; start python -m trainer there alone ({POD_DOCS})")
    return grpc_hosts(raw.split(","))


def target(tpu: str, environ: Mapping[str, str] = os.environ) -> str:
    """What TPUClusterResolver(tpu=...) gets for trainer.tpu."""
    return hosts_from_env(environ) if tpu == HOSTS else tpu


def prepare_client(tpu: str, environ: MutableMapping[str, str] = os.environ) -> None:
    """Before TensorFlow starts: a remote TPU's client must not claim the local chips (TPU_LOAD_LIBRARY=0).
    A value set already is kept, so a contradicting one surfaces in client_problem instead of being hidden."""
    if is_remote(tpu):
        environ.setdefault(LOAD_LIBRARY_ENV, "0")


def client_problem(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """What in this process's environment stops it from being a remote TPU's client; None when nothing does."""
    if environ.get(LOAD_LIBRARY_ENV) != "0":
        return (f"{LOAD_LIBRARY_ENV} must be 0 on a TPU pod's client, set before TensorFlow starts (got "
                f"{environ.get(LOAD_LIBRARY_ENV)!r}); python -m trainer sets it from the job's trainer.tpu")
    pjrt = [name for name in PJRT_ENV_NAMES if environ.get(name)]
    if pjrt:
        return (f"unset {', '.join(pjrt)} on a TPU pod's client: they make TensorFlow load libtpu here, while the "
                "pod's TPU runtime on each host serves the chips")
    return None


def prepare_from_argv(argv: list[str], environ: MutableMapping[str, str] = os.environ) -> None:
    """prepare_client for `python -m trainer train [options] JOB`, before its CLI imports TensorFlow: the job
    is the first argument after `train` that is a file. Missed, nothing is set and the strategy refuses."""
    if argv[:1] == ["train"]:
        job = next((arg for arg in argv[1:] if os.path.isfile(arg)), None)
        prepare_client((job and tpu_in_job_file(job)) or LOCAL, environ)


def local_slice_problem(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """Why trainer.tpu=local cannot train here: this VM is one host of a multi-host slice (it lists its hosts),
    where every host would start its own trainer, all chiefs of one checkpoint and export. None otherwise."""
    hosts = [h for h in environ.get(HOSTNAMES_ENV, "").split(",") if h.strip()]
    if len(hosts) > 1:
        return (f"trainer.tpu=local, but this VM is one of the {len(hosts)} hosts of a TPU slice ({HOSTNAMES_ENV}): "
                f"each would train on its own. Run one client, on worker 0, with trainer.tpu: {HOSTS} ({POD_DOCS})")
    return None


def tpu_in_job_file(path: str) -> Optional[str]:
    """The trainer.tpu a job file asks for, read without validation (the CLI validates it later); None if unreadable."""
    try:
        with open(path) as f:
            job = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None
    trainer = job.get("trainer") if isinstance(job, dict) else None
    tpu = trainer.get("tpu") if isinstance(trainer, dict) else None
    return tpu if isinstance(tpu, str) else None
