"""serving.check.before_run: `serving check` as the run's first step, after the run lease and before the Snapshot.
Why and sources: docs/serving.md, "`serving check`"."""

from __future__ import annotations

from typing import Optional

from tfx.dsl.components.base.base_node import BaseNode

from components.coordination.run_lease import OWNER_PLACEHOLDER
from components.serving.canary_check_component import CanaryCheck
from pipeline.config import Config

CANARY_CHECK_ID = "CanaryCheck"


def canary_check_step(config: Config, run_lease: bool) -> Optional[BaseNode]:
    """The step, or None with before_run off. In a compiled run it moves labels as the run holding the lease."""
    if not config.serving.check.before_run:
        return None
    return CanaryCheck(serving_dir=config.pipeline.serving_dir, model_name=config.pipeline.name,
                       metrics_dir=config.serving_metrics_dir, rules=config.serving.check.rules(),
                       endpoint_target=config.serving.endpoint_target(config.vertex, config.pipeline.name),
                       monitoring_endpoint=config.serving.check.monitoring_endpoint,
                       model_config_poll_seconds=config.serving.model_config_poll_seconds,
                       lease_root=config.pipeline.root_uri if run_lease else None,
                       lease_owner=OWNER_PLACEHOLDER if run_lease else None,
                       lease_ttl_seconds=float(config.pipeline.run_lease_ttl_seconds)).with_id(CANARY_CHECK_ID)
