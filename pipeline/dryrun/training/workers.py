"""A Vertex AI CustomJob run as local processes, one per replica of each worker pool.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from pipeline.dryrun import forkserver
from pipeline.dryrun.ports import free_port
from pipeline.errors import JobRefused
from trainer.run_fn import CONFIG_KEY

_POOL_FIELDS = {"machine_spec", "replica_count", "container_spec", "disk_spec"}
# A TPU runtime's switches: TF loads the named PJRT plugin at import, and TPU_* make the trainer look for a TPU.
_TPU_ENV = ("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "NEXT_PLUGGABLE_DEVICE_USE_C_API")
_TPU_ENV_PREFIXES = ("TPU_", "PJRT_")
# Job fields that decide nothing about what runs here; each one present is named on the console.
_NO_LOCAL_EFFECT = ("service_account", "scheduling", "network", "reserved_ip_ranges", "enable_web_access",
                    "enable_dashboard_access", "tensorboard", "experiment", "experiment_run", "persistent_resource_id",
                    "protected_artifact_location_id", "models")


@dataclasses.dataclass
class Settings:
    env: dict[str, str]                 # the environment of every replica before Vertex's variables
    logs: Path
    to_local: Callable[[str], str]      # gs:// -> the mapped local path
    report: Callable[[str], None]
    cwd: Path


@dataclasses.dataclass
class Replica:
    pool: str
    index: int
    command: list[str]
    env: dict[str, str]                 # what Vertex (and the spec) add for this replica
    log: Path
    returncode: Optional[int] = None
    process: Optional[Any] = None       # a subprocess.Popen or a forkserver.ForkedProcess


@dataclasses.dataclass
class JobRun:
    name: str
    display_name: str
    replicas: list[Replica]
    state: str = "PENDING"
    error: str = ""
    done: threading.Event = dataclasses.field(default_factory=threading.Event)

    def stop(self) -> None:
        for r in self.replicas:
            if r.process is not None and r.process.poll() is None:
                r.process.terminate()


def start(name: str, job: dict[str, Any], settings: Settings) -> JobRun:
    """Check the job, print what is emulated, start its replicas in the background."""
    run = plan(name, job, settings)
    threading.Thread(target=_supervise, args=(run, settings), daemon=True).start()
    return run


def plan(name: str, job: dict[str, Any], settings: Settings) -> JobRun:
    spec = job.get("job_spec", {})
    pools = spec.get("worker_pool_specs", [])
    if not pools or not pools[0]:
        raise JobRefused("job_spec.worker_pool_specs[0]: the primary pool is missing")
    for key in sorted(set(spec) & set(_NO_LOCAL_EFFECT)):
        settings.report(f"  CustomJob job_spec.{key}: no effect in the dry run")
    total = sum(int(p.get("replica_count", 1)) for p in pools if p)
    hosts = {f"workerpool{i}": [f"127.0.0.1:{free_port()}" for _ in range(int(p.get("replica_count", 1)))]
             for i, p in enumerate(pools) if p}
    aip = _aip_env(spec, settings)
    logs = settings.logs / f"customjob-{name.rsplit('/', 1)[-1]}"
    replicas = []
    for i, pool in enumerate(pools):
        if not pool:
            continue  # Vertex skips empty pools
        command, env = _pool_command(i, pool, total, settings)
        count = int(pool.get("replica_count", 1))
        if i == 0 and count != 1:
            raise JobRefused(f"job_spec.worker_pool_specs[0].replica_count: the primary pool takes 1, got {count}")
        for index in range(count):
            cluster = {"cluster": hosts, "environment": "cloud", "task": {"type": f"workerpool{i}", "index": index},
                       "job": spec}
            replicas.append(Replica(f"workerpool{i}", index, command,
                                    {**env, **aip, "CLUSTER_SPEC": json.dumps(cluster)},
                                    logs / f"workerpool{i}-{index}.log"))
    return JobRun(name, job.get("display_name", ""), replicas)


def _pool_command(i: int, pool: dict[str, Any], total: int, settings: Settings) -> tuple[list[str], dict]:
    field = f"job_spec.worker_pool_specs[{i}]"
    extra = sorted(set(pool) - _POOL_FIELDS)
    if extra:
        raise JobRefused(f"{field}.{extra[0]}: not emulated (only container_spec pools run here)")
    container = pool.get("container_spec", {})
    command = [*container.get("command", []), *container.get("args", [])]
    if not command or command[0] not in ("python", "python3"):
        raise JobRefused(f"{field}.container_spec.command: {command[:1]} cannot run here; "
                         "the dry run runs `python ...` commands in this environment")
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    machine = pool.get("machine_spec", {})
    accelerator = machine.get("accelerator_type", "")
    is_tpu = "tpu_topology" in machine or accelerator.startswith("TPU") or machine.get("machine_type", "").startswith(
        ("ct", "cloud-tpu"))
    described = ", ".join(f"{k} {v}" for k, v in sorted(machine.items()))
    settings.report(f"  CustomJob {field}: {pool.get('replica_count', 1)} x [{described}], image "
                    f"{container.get('image_uri', '(none)')} not pulled: runs in this environment")
    if is_tpu or accelerator:
        settings.report(f"  DEVICE EMULATED: {field} asks for {'a TPU' if is_tpu else accelerator}; "
                        "there is none here, so it runs on CPU")
        command = _cpu_trainer(command, total, field, settings, is_tpu)
    if is_tpu:
        for key in sorted(env):
            if key in _TPU_ENV or key.startswith(_TPU_ENV_PREFIXES):
                settings.report(f"  {field}.container_spec.env {key}={env.pop(key)} withheld: "
                                "it loads a TPU runtime this machine does not have")
    for key, value in sorted(env.items()):
        settings.report(f"  {field}.container_spec.env {key}={value}")
    return [sys.executable, *command[1:]], env


def _cpu_trainer(command: list[str], total: int, field: str, settings: Settings, is_tpu: bool) -> list[str]:
    """The trainer config of an accelerator pool running on CPU, changed in the job's own --exec-properties:
    `strategy: tpu` cannot run on CPU, and `require_accelerator` would refuse to start without the device."""
    if "--exec-properties" not in command:
        settings.report(f"  {field}: no --exec-properties in the command; it runs unchanged on CPU")
        return command
    i = command.index("--exec-properties") + 1
    props = json.loads(command[i])
    custom = props.get("custom_config")
    custom = json.loads(custom) if isinstance(custom, str) else custom
    trainer = (custom or {}).get(CONFIG_KEY)
    if not trainer:
        return command
    changes = {}
    if is_tpu and trainer.get("strategy") == "tpu":
        changes["strategy"] = "multi_worker" if total > 1 else "default"
    if trainer.get("require_accelerator"):
        changes["require_accelerator"] = None
    for key, value in changes.items():
        settings.report(f"  TRAINER CONFIG OVERRIDDEN: custom_config.{CONFIG_KEY}.{key} {trainer[key]!r} -> "
                        f"{value!r} in the CustomJob's --exec-properties, because the device is emulated on CPU")
        trainer[key] = value
    props["custom_config"] = json.dumps(custom)
    return [*command[:i], json.dumps(props), *command[i + 1:]]


def _aip_env(spec: dict[str, Any], settings: Settings) -> dict[str, str]:
    base = spec.get("base_output_directory", {}).get("output_uri_prefix")
    if not base:
        return {}
    base = settings.to_local(base).rstrip("/")
    return {"AIP_MODEL_DIR": f"{base}/model/", "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
            "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/"}



def _supervise(run: JobRun, settings: Settings) -> None:
    """Start every replica; the job fails as soon as one fails (the others are stopped), as on Vertex."""
    logs = run.replicas[0].log.parent
    logs.mkdir(parents=True, exist_ok=True)
    run.state = "RUNNING"
    try:
        for r in run.replicas:
            with open(r.log, "w") as log:
                r.process = forkserver.start(r.command, {**settings.env, **r.env}, settings.cwd, log)
        settings.report(f"  CustomJob {run.name}: {len(run.replicas)} replica process(es) started, logs in {logs}")
        culprit, chief = None, _Follow(run.replicas[0].log)
        while culprit is None and any(r.process.poll() is None for r in run.replicas):
            culprit = next((r for r in run.replicas if r.process.returncode not in (None, 0)), None)
            for line in chief.new_lines():
                settings.report(f"    {line}")
            time.sleep(0.5)
        for line in chief.new_lines():
            settings.report(f"    {line}")
        run.stop()
        for r in run.replicas:
            r.returncode = r.process.wait()
        failed = [r for r in run.replicas if r.returncode != 0]
        culprit = culprit or (failed[0] if failed else None)
        if culprit is not None:
            run.error = (f"The replica {culprit.pool}-{culprit.index} exited with a non-zero status of "
                         f"{culprit.returncode} (log: {culprit.log})")
        run.state = "FAILED" if failed else "SUCCEEDED"
    except OSError as e:
        run.state, run.error = "FAILED", f"could not start a replica: {e}"
    finally:
        run.done.set()


class _Follow:
    """The trainer's own progress lines (steps, strategy, export) as they appear in the primary replica's log,
    shown as `make run` shows them."""
    _LINE = re.compile(r"^[IWE]\d{4} [\d:.]+ +\d+ (?:loop|run_fn|strategy)\.py:\d+\] (.*)$")

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def new_lines(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self.offset += len(complete)
        return [m[1] for m in map(self._LINE.match, complete.decode(errors="replace").splitlines()) if m]
