"""CanaryCheck: `serving check` as a run's first step (serving.check.before_run), after the run lease and before the
Snapshot: the canary against stable on TF Serving's recorded scrapes, then promote, roll back or wait, the reason
written into the label move. It only moves labels: no version is written or deleted.
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

from components import lease, rollout
from components.canary_check import Rules, judge
from components.canary_prometheus import PrometheusScrapes

SERVING_DIR, MODEL_NAME, METRICS_DIR, RULES = "serving_dir", "model_name", "metrics_dir", "rules"
# The run's lease (components/run_lease.py) on Vertex/Kubeflow: the labels move only while this run holds it. A
# local run holds the root's lock in its own process (pipeline/local/lock.py) and passes none.
LEASE_ROOT, LEASE_OWNER, LEASE_TTL = "lease_root", "lease_owner", "lease_ttl_seconds"
# Set by the driver at run time (local runs): the check decides on the metrics of now, so it is never a cache hit.
CHECKED_AT = "checked_at"


def check_and_move(base: str, model_name: str, metrics_dir: str, rules: Rules, by: str,
                   now: Optional[float] = None) -> str:
    """Decide on the canary out (if any) and apply it to the labels; the line says what and why."""
    line, decision = judge(base, lambda _: PrometheusScrapes(metrics_dir, model_name), rules,
                           time.time() if now is None else now)
    if decision is None:
        return line
    if decision.action == "promote":
        return f"{line}\n{rollout.promote(base, model_name, by, why=decision.why).describe()}"
    if decision.action == "rollback":
        return f"{line}\n{rollout.rollback(base, model_name, by, why=decision.why).describe()}"
    return line


class CanaryCheckSpec(types.ComponentSpec):
    PARAMETERS = {
        SERVING_DIR: component_spec.ExecutionParameter(type=str),
        MODEL_NAME: component_spec.ExecutionParameter(type=str),
        METRICS_DIR: component_spec.ExecutionParameter(type=str),
        RULES: component_spec.ExecutionParameter(type=str),  # JSON of canary_check.Rules (serving.check)
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
        args = (exec_properties[SERVING_DIR], exec_properties[MODEL_NAME], exec_properties[METRICS_DIR], rules)
        by = f"serving check, first step of run {owner or lease.default_owner()}"
        if owner:  # LeaseLost, nothing moved, when the run no longer holds the root
            held = lease.adopt(exec_properties[LEASE_ROOT],
                               owner, float(exec_properties.get(LEASE_TTL) or lease.DEFAULT_TTL_SECONDS))
            with held.kept_alive(release=False):
                line = check_and_move(*args, by=by)
        else:
            line = check_and_move(*args, by=by)
        for text in line.splitlines():
            logging.info("%s", text)


class CanaryCheck(base_component.BaseComponent):
    SPEC_CLASS = CanaryCheckSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(CanaryCheckExecutor)
    DRIVER_CLASS = CanaryCheckDriver

    def __init__(self, serving_dir: str, model_name: str, metrics_dir: str, rules: Rules,
                 lease_root: Optional[str] = None, lease_owner: Optional[str] = None,
                 lease_ttl_seconds: Optional[float] = None):
        super().__init__(CanaryCheckSpec(
            serving_dir=serving_dir, model_name=model_name, metrics_dir=metrics_dir,
            rules=json.dumps(rules.__dict__, sort_keys=True), lease_root=lease_root or None,
            lease_owner=lease_owner or None, lease_ttl_seconds=lease_ttl_seconds if lease_owner else None))
