"""The dry run's services as the processes on this machine reach them: the endpoint stand-in a dry run points
its Pusher at, and, for the commands after a dry run (`python -m pipeline serving ... --dryrun-dir DIR`), the
config as the dry run's tasks saw it. Why: docs/serving.md, "Trying it without Google Cloud"."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Optional, TextIO

from components.gcs import bucket_of
from pipeline.config import Config, resolve
from pipeline.dryrun import gcs_emulator
from pipeline.dryrun.bucket import BucketMap, local_view
from pipeline.dryrun.vertex_endpoints import VertexEndpoints
from pipeline.errors import ConfigError
from trainer.environment import overriding

ENDPOINTS_STATE = Path("vertex-endpoints") / "state.json"


@contextlib.contextmanager
def endpoint_stand_in(config: Config, local_dir: Path, stream: Optional[TextIO] = None) -> Iterator[Config]:
    """`config` with serving.vertex_endpoint.api_endpoint at a stand-in over `<local_dir>/vertex-endpoints/`,
    answering while inside. Unchanged for TF Serving, or when the config names a loopback stand-in of its own;
    a Google host is refused, as a dry run reaches no Google API."""
    section = config.serving.vertex_endpoint if config.serving.target == "vertex_endpoint" else None
    if section is None or section.api_endpoint.startswith("http://"):
        yield config
        return
    if section.api_endpoint:
        raise ConfigError(f"serving.vertex_endpoint.api_endpoint {section.api_endpoint}: a dry run reaches no "
                          "Google API; leave it empty and the dry run starts its endpoint stand-in")
    stand_in = VertexEndpoints(Path(local_dir) / ENDPOINTS_STATE)
    endpoint = config.serving.endpoint_target(config.vertex, config.pipeline.name)["endpoint"]
    if stand_in.add_endpoint(endpoint) and stream is not None:
        stream.write(f"endpoint stand-in: created {endpoint}, which on Google Cloud must exist already "
                     f"(state: {stand_in.state})\n")
    url = stand_in.start()
    try:
        yield config.model_copy(update={"serving": config.serving.model_copy(
            update={"vertex_endpoint": section.model_copy(update={"api_endpoint": url})})})
    finally:
        stand_in.stop()


@contextlib.contextmanager
def command_view(config: Config, local_dir: str | os.PathLike) -> Iterator[Config]:
    """`config` as the dry run on `local_dir` ran it: pipeline.root mapped into its bucket, the GCS emulator
    that keeps its models.config and claims in this process's environment, the endpoint at its stand-in, and no
    model server reading models.config."""
    if not config.pipeline.root_uri.startswith("gs://"):
        raise ConfigError(f"--dryrun-dir acts on a dry run of a cloud config, whose pipeline.root is a gs:// URI; "
                          f"this config's is {config.pipeline.root_uri}: pass the config the dry run ran "
                          "(--config configs/vertex.yaml, as make dryrun does)")
    bucket = BucketMap(resolve(str(local_dir)))
    if not bucket.root.is_dir():
        raise ConfigError(f"--dryrun-dir {local_dir}: no dry run's bucket at {bucket.root}; run "
                          f"`python -m pipeline dryrun --local-dir {local_dir}` first")
    with gcs_emulator.shared(bucket.root.parent, [bucket_of(config.pipeline.root_uri)]) as env, \
            endpoint_stand_in(config, bucket.root.parent) as config:
        # No model server reads a dry run's bucket: a label move need not wait for one's poll (rollout.Reload).
        config = config.model_copy(update={"serving": config.serving.model_copy(
            update={"model_config_poll_seconds": 0.0})})
        with overriding(env):
            yield local_view(config, bucket)
