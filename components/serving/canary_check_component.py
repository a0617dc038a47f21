"""CanaryCheck: `serving check` as a run's first step (serving.check.before_run), after the run lease and before the
Snapshot: the canary against stable on TF Serving's recorded scrapes, or with serving.target vertex_endpoint on the
endpoint's Cloud Monitoring series, then promote, roll back or wait, the reason written into the label move. It only
moves labels and the endpoint's traffic and aliases: no version is written or deleted.
Why and sources: docs/serving.md, "`serving check`"."""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Optional

from tfx import types
from tfx.dsl.components.base import base_component, base_driver, base_executor, executor_spec
from tfx.proto.orchestration import driver_output_pb2
from tfx.types import component_spec

from components.coordination import lease
from components.serving import rollout, serving_move, vertex_endpoint
from components.serving.canary_check import Rules, judge
from components.serving.canary_monitoring import for_endpoint
from components.serving.canary_prometheus import PrometheusScrapes

SERVING_DIR, MODEL_NAME, METRICS_DIR, RULES = "serving_dir", "model_name", "metrics_dir", "rules"
# With serving.target vertex_endpoint: the Target's fields as JSON, and serving.check.monitoring_endpoint.
ENDPOINT_TARGET, MONITORING_ENDPOINT = "endpoint_target", "monitoring_endpoint"
# The run's lease (components/coordination/run_lease.py) on Vertex/Kubeflow: the labels move only while this run holds
# it. A local run holds the root's lock in its own process (pipeline/local/lock.py) and passes none.
LEASE_ROOT, LEASE_OWNER, LEASE_TTL = "lease_root", "lease_owner", "lease_ttl_seconds"
# serving.model_config_poll_seconds: the servers of models.config (rollout.Reload).
MODEL_CONFIG_POLL = "model_config_poll_seconds"
# Set by the driver at run time (local runs): the check decides on the metrics of now, so it is never a cache hit.
CHECKED_AT = "checked_at"


def check_and_move(base: str, model_name: str, metrics_dir: str, rules: Rules, by: str,
                   target: Optional[vertex_endpoint.Target] = None, monitoring_endpoint: str = "",
                   now: Optional[float] = None, reload: rollout.Reload = rollout.NO_SERVER) -> str:
    """Decide on the canary out (if any) and apply it (serving_move: the endpoint first when there is one, then the
    labels); the line says what and why."""
    def source_for(labels):
        return (for_endpoint(target, base, labels, monitoring_endpoint) if target is not None
                else PrometheusScrapes(metrics_dir, model_name))
    line, decision = judge(base, source_for, rules, time.time() if now is None else now)
    if decision is None or decision.action not in ("promote", "rollback"):
        return line
    moved = serving_move.move(base, model_name, decision.action, by, target, why=decision.why, reload=reload)
    return f"{line}\n{moved.describe()}"


class CanaryCheckSpec(types.ComponentSpec):
    PARAMETERS = {
        SERVING_DIR: component_spec.ExecutionParameter(type=str),
        MODEL_NAME: component_spec.ExecutionParameter(type=str),
        METRICS_DIR: component_spec.ExecutionParameter(type=str),
        RULES: component_spec.ExecutionParameter(type=str),  # JSON of canary_check.Rules (serving.check)
        ENDPOINT_TARGET: component_spec.ExecutionParameter(type=str, optional=True),
        MONITORING_ENDPOINT: component_spec.ExecutionParameter(type=str, optional=True),
        MODEL_CONFIG_POLL: component_spec.ExecutionParameter(type=float, optional=True),
        LEASE_ROOT: component_spec.ExecutionParameter(type=str, optional=True),
        LEASE_OWNER: component_spec.ExecutionParameter(type=str, optional=True),
        LEASE_TTL: component_spec.ExecutionParameter(type=float, optional=True),
        CHECKED_AT: component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {}
    OUTPUTS = {}


class CanaryCheckDriver(base_driver.BaseDriver):
    """Local runs: a new `checked_at` every run, part of the cache key (as training_record.ServingVersionDriver
    does for the serving dir). Vertex runs no custom drivers: there the task is never cached
    (pipeline/spec/cache_rule.py)."""

    def run(self, execution_info) -> driver_output_pb2.DriverOutput:
        result = driver_output_pb2.DriverOutput()
        result.exec_properties[CHECKED_AT].string_value = f"{time.time():.6f}"
        return result


class CanaryCheckExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict: dict, output_dict: dict, exec_properties: dict[str, Any]) -> None:
        rules = Rules(**json.loads(exec_properties[RULES]))
        owner = exec_properties.get(LEASE_OWNER) or ""
        fields = exec_properties.get(ENDPOINT_TARGET)
        args = dict(base=exec_properties[SERVING_DIR], model_name=exec_properties[MODEL_NAME],
                    metrics_dir=exec_properties[METRICS_DIR], rules=rules,
                    by=f"serving check, first step of run {owner or lease.default_owner()}",
                    target=vertex_endpoint.Target(**json.loads(fields)) if fields else None,
                    monitoring_endpoint=exec_properties.get(MONITORING_ENDPOINT) or "",
                    reload=rollout.Reload(float(exec_properties.get(MODEL_CONFIG_POLL) or 0.0)))
        if owner:  # LeaseLost, nothing moved, when the run no longer holds the root
            held = lease.adopt(exec_properties[LEASE_ROOT],
                               owner, float(exec_properties.get(LEASE_TTL) or lease.DEFAULT_TTL_SECONDS))
            with held.kept_alive(release=False):
                line = check_and_move(**args)
        else:
            line = check_and_move(**args)
        for text in line.splitlines():
            logging.info("%s", text)


class CanaryCheck(base_component.BaseComponent):
    SPEC_CLASS = CanaryCheckSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(CanaryCheckExecutor)
    DRIVER_CLASS = CanaryCheckDriver

    def __init__(self, serving_dir: str, model_name: str, metrics_dir: str, rules: Rules,
                 endpoint_target: Optional[dict] = None, monitoring_endpoint: str = "",
                 lease_root: Optional[str] = None, lease_owner: Optional[str] = None,
                 lease_ttl_seconds: Optional[float] = None, model_config_poll_seconds: float = 0.0):
        super().__init__(CanaryCheckSpec(
            serving_dir=serving_dir, model_name=model_name, metrics_dir=metrics_dir,
            rules=json.dumps(rules.__dict__, sort_keys=True),
            endpoint_target=json.dumps(endpoint_target, sort_keys=True) if endpoint_target else None,
            monitoring_endpoint=monitoring_endpoint or None,
            model_config_poll_seconds=model_config_poll_seconds or None, lease_root=lease_root or None,
            lease_owner=lease_owner or None, lease_ttl_seconds=lease_ttl_seconds if lease_owner else None))
