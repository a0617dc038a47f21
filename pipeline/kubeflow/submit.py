"""`python -m pipeline submit` with `pipeline.target: kubeflow`: compile (or take --spec), then create a run on
the KFP API server through kfp.Client. (docs/internals.md)"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from pipeline.cloud.follow import follow
from pipeline.config import Config
from pipeline.errors import EXIT_FAILED, EXIT_OK, ConfigError
from pipeline.kubeflow.client import call, make_client

# V2beta1RuntimeState values that end a run (backend/api/v2beta1/run.proto, RuntimeState).
_DONE_OK = "SUCCEEDED"
_DONE_BAD = ("FAILED", "CANCELED", "SKIPPED")


@dataclass(frozen=True)
class Submitted:
    run_id: str
    experiment: str


def package_for(config: Config, args) -> Path:
    """--spec FILE (a spec compiled earlier, sent as is), else a fresh compile to -o."""
    if getattr(args, "api_endpoint", None):
        raise ConfigError("--api-endpoint is for Vertex AI; with pipeline.target kubeflow the API server is "
                          "kubeflow.host")
    if getattr(args, "spec", None):
        package = Path(args.spec)
        if not package.is_file() or package.suffix not in (".yaml", ".yml"):
            raise ConfigError(f"--spec {args.spec!r}: expected a compiled pipeline .yaml (`compile` writes one)")
        return package
    from pipeline.kubeflow.compile import compile_pipeline

    return compile_pipeline(config, args.output)


def submit(config: Config, package: Path, run_name: Optional[str] = None) -> Submitted:
    kf = config.kubeflow
    client = make_client(config)
    name = run_name or f"{config.pipeline.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    result = call(config, "creating the run", lambda: client.create_run_from_pipeline_package(
        pipeline_file=str(package), arguments={}, run_name=name,
        experiment_name=kf.experiment_name(config.pipeline.name), namespace=kf.namespace,
        pipeline_root=config.pipeline.pipeline_root, enable_caching=None,
        service_account=kf.service_account))
    return Submitted(result.run_id, kf.experiment_name(config.pipeline.name))


def wait(config: Config, run_id: str, poll_seconds: float = 30.0, report: Callable[[str], None] = print) -> bool:
    """Follow the run until it ends; report each state change; True if it succeeded."""
    client = make_client(config)

    def read() -> tuple[str, Optional[str]]:
        run = call(config, f"reading run {run_id}", lambda: client.get_run(run_id))
        return run.state or "RUNTIME_STATE_UNSPECIFIED", run.error.message if run.error else None

    return follow(read, _DONE_OK, _DONE_BAD, poll_seconds, report)


def cmd_submit(config: Config, args) -> int:
    from pipeline.cloud.cache_override import cache_override_note
    from pipeline.kubeflow.compile import with_caching
    from pipeline.kubeflow.preflight import ensure

    if args.job_id:
        raise ConfigError("--job-id is for Vertex AI; a KFP run is named <pipeline name>-<time> and gets its id "
                          "from the server")
    ensure(config, args.skip_preflight, args.preflight_endpoint)
    package = package_for(config, args)
    if note := cache_override_note(args.cache):
        print(note, file=sys.stderr)
    run = submit(config, with_caching(package, args.cache))
    print(f"submitted run {run.run_id} (experiment {run.experiment}, namespace {config.kubeflow.namespace})")
    if args.wait and not wait(config, run.run_id, args.poll_seconds):
        return EXIT_FAILED
    return EXIT_OK
