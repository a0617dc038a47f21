"""Pusher: TFX's filesystem Pusher with three changes for a directory TF Serving watches.
Why and sources: docs/internals.md."""

from __future__ import annotations

import json
import logging
import tempfile
import uuid
from typing import Any, Optional

from tfx import types
from tfx.components.pusher import executor as tfx_pusher_executor
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, component_spec, standard_artifacts, standard_component_specs
from tfx.utils import io_utils, proto_utils

from components import training_record
from components.coordination import lease
from components.data.snapshot.component import SPAN_DIGESTS, TRAINING_KEY, DatasetSnapshot, spans_of
from components.evaluation.evaluator import MAIN_METRIC, MAIN_METRIC_VALUE
from components.serving import rollout, serving_dir, serving_gate, vertex_endpoint

UNCHANGED_VERSION = "unchanged_version"
UNCHANGED_LABEL = "unchanged_label"  # which label that version has: stable, or canary (components/serving/rollout.py)
REMOVED_DEBRIS = "removed_debris"  # what killed pushes had left, removed by this push ("; "-separated)
STATISTICS_KEY, SNAPSHOT_KEY, EXAMPLES_KEY = "statistics", "snapshot", "examples"
# The serving section as GateSettings JSON (components/serving/serving_gate.py); with the examples input, the
# candidate gets its warm-up file and must pass the serving gate to be pushed.
SERVING_KEY = "serving"
REFUSED = "refused"  # why the serving gate refused the candidate (nothing pushed); "" when it passed
GATE = "serving_gate"  # what the serving gate found, a sentence
LABELS = "serving_labels"  # the labels after this push: "stable V[, canary W]"
VERTEX = "vertex_endpoint"  # serving.target vertex_endpoint: champion and challenger after this push
LEASE_ROOT = "lease_root"  # the pipeline root whose run lease (components/coordination/lease.py) tells debris apart
# A run on Vertex or Kubeflow: the run that holds that lease (components/coordination/run_lease.py) and its ttl.
# The push renews the lease as that run and heartbeats it while it works; LeaseLost (nothing pushed) if the run lost it.
LEASE_OWNER, LEASE_TTL = "lease_owner", "lease_ttl_seconds"


class PusherSpec(standard_component_specs.PusherSpec):
    """TFX's Pusher spec plus the training data of the model, for its record."""

    INPUTS = {
        **standard_component_specs.PusherSpec.INPUTS,
        STATISTICS_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
        SNAPSHOT_KEY: component_spec.ChannelParameter(type=DatasetSnapshot, optional=True),
        EXAMPLES_KEY: component_spec.ChannelParameter(type=standard_artifacts.Examples, optional=True),
    }
    PARAMETERS = {
        **standard_component_specs.PusherSpec.PARAMETERS,
        LEASE_ROOT: component_spec.ExecutionParameter(type=str, optional=True),
        LEASE_OWNER: component_spec.ExecutionParameter(type=str, optional=True),
        LEASE_TTL: component_spec.ExecutionParameter(type=float, optional=True),
        SERVING_KEY: component_spec.ExecutionParameter(type=str, optional=True),
    }


class PushExecutor(tfx_pusher_executor.Executor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            return
        model_path = self.GetModelPath(input_dict)
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination)
        if destination.WhichOneof("destination") != "filesystem":
            raise NotImplementedError("this Pusher pushes to a filesystem destination only")
        base = destination.filesystem.base_directory

        # This run's identity: its own debris (an earlier attempt's) is always its to remove.
        run = (self._context.pipeline_run_id if self._context else None) or f"push-{uuid.uuid4().hex}"
        root, owner = exec_properties.get(LEASE_ROOT) or "", exec_properties.get(LEASE_OWNER) or ""
        settings = serving_gate.GateSettings.from_json(exec_properties[SERVING_KEY]) \
            if exec_properties.get(SERVING_KEY) else None
        with tempfile.TemporaryDirectory(prefix="push-") as staging:
            if settings is not None and input_dict.get(EXAMPLES_KEY):
                # What is pushed is this copy: the candidate with its warm-up file, as the gate checked it.
                candidate = f"{staging}/model"
                io_utils.copy_dir(model_path, candidate)
                serving_gate.add_warmup(candidate, artifact_utils.get_single_uri(input_dict[EXAMPLES_KEY]), settings)
            else:
                logging.warning("no examples input or serving settings: pushing without a warm-up file or the "
                                "serving gate")
                candidate, settings = model_path, None
            if owner:  # a run on Vertex/Kubeflow: it holds the lease as `owner`; LeaseLost when it no longer does
                held = lease.adopt(root, owner, float(exec_properties.get(LEASE_TTL) or lease.DEFAULT_TTL_SECONDS))
                with held.kept_alive(release=False):
                    self._push(model_push, candidate, base, owner, root, input_dict, settings)
            else:  # a local run holds the lease in its own process (pipeline/local/lock.py)
                self._push(model_push, candidate, base, run, root, input_dict, settings)

    def _push(self, model_push, model_path: str, base: str, run: str, root: str,
              input_dict: dict[str, list[types.Artifact]], settings: Optional[serving_gate.GateSettings]) -> None:
        since = lease.live_since(root) if root else None
        removed = serving_dir.clear_debris(base, run, since) + training_record.prune(base, run, since)
        for what in removed:
            logging.warning("removed what a killed push left in %s: %s", base, what)
        model_push.set_string_custom_property(REMOVED_DEBRIS, "; ".join(removed))
        # Stable, or the canary out: a run never pushes again what either already is.
        digest = serving_dir.tree_digest(model_path)
        for label, current in serving_dir.served(base).items():
            if current is not None and serving_dir.tree_digest(current.path) == digest:
                logging.info("the candidate is identical to %s version %s; pushing nothing", label, current.name)
                self._MarkNotPushed(model_push)
                model_push.set_string_custom_property(UNCHANGED_VERSION, current.name)
                model_push.set_string_custom_property(UNCHANGED_LABEL, label)
                return
        if settings is not None:
            verdict = serving_gate.check(model_path, settings)
            model_push.set_string_custom_property(GATE, verdict.describe())
            if not verdict.ok:
                logging.error("serving gate: %s; nothing pushed, what serves is untouched", verdict.reason)
                model_push.set_string_custom_property(REFUSED, verdict.reason)
                self._MarkNotPushed(model_push)
                return
        version = serving_dir.claim_version(base, run)
        record = _write_record(base, version, input_dict, run)
        try:
            serving_path = serving_dir.publish(model_path, base, version)
        except BaseException:
            if record:  # a version that never appeared keeps no record (a killed push's: prune, next push)
                training_record.remove(base, version)
            raise
        logging.info("model published as %s", serving_path)
        if settings is not None and settings.vertex_endpoint:  # serving.target vertex_endpoint (before the labels)
            model_push.set_string_custom_property(VERTEX, _to_endpoint(settings, base, serving_path, version, run))
        if settings is not None:  # TF Serving's model config: the version under stable or canary (serving.rollout)
            moved = rollout.after_push(base, settings.model_name, version, settings.rollout, run,
                                       reload=rollout.Reload(settings.model_config_poll_seconds))
            logging.info("serving labels: %s", moved.describe())
            model_push.set_string_custom_property(LABELS, f"stable {moved.stable}" + (
                f", canary {moved.canary}" if moved.canary is not None else ""))
        io_utils.copy_dir(model_path, model_push.uri)
        self._MarkPushed(model_push, pushed_destination=serving_path, pushed_version=str(version))


def _to_endpoint(settings: serving_gate.GateSettings, base: str, serving_path: str, version: int, run: str) -> str:
    """The version just published as a new registry version (challenger) deployed at the canary share, or with
    direct rollout at 100% and promoted at once. The TF Serving labels follow in the same push (after_push)."""
    target = vertex_endpoint.Target(**settings.vertex_endpoint)
    model_version_id = vertex_endpoint.upload_version(target, serving_path, version)
    stable = rollout.before_push(base, version).stable  # the champion, on an endpoint new to this serving dir
    record = vertex_endpoint.deploy_canary(target, base, version, model_version_id, run,
                                           share=100 if settings.rollout == rollout.DIRECT else None,
                                           stable=None if stable is None else (stable,
                                                                               serving_dir.version_path(base, stable)))
    logging.info("vertex endpoint %s: %s", target.endpoint, vertex_endpoint.describe(record))
    return vertex_endpoint.describe(record)


def _write_record(base: str, version: int, input_dict: dict[str, list[types.Artifact]], run: str) -> Optional[str]:
    statistics = input_dict.get(STATISTICS_KEY) or []
    if not statistics:
        logging.warning("no statistics input: version %s gets no training-data record; "
                        "the drift gate will have nothing to compare it with", version)
        return None
    snapshots = input_dict.get(SNAPSHOT_KEY) or []
    snapshot = snapshots[0] if snapshots else None
    model = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
    path = training_record.write(
        base, version, statistics_uri=artifact_utils.get_single_uri(statistics), model_uri=model.uri,
        spans=spans_of(snapshot) if snapshot else (),
        span_digests=json.loads(snapshot.get_string_custom_property(SPAN_DIGESTS) or "{}") if snapshot else None,
        snapshot_digest=snapshot.get_string_custom_property("digest") if snapshot else "",
        snapshot_rows=snapshot.get_int_custom_property("rows") if snapshot else None,
        training_key=snapshot.get_string_custom_property(TRAINING_KEY) if snapshot else "",
        run=run, metric=_gated_metric(input_dict))
    logging.info("training-data record of version %s written to %s", version, path)
    return path


def _gated_metric(input_dict: dict[str, list[types.Artifact]]) -> Optional[tuple[str, float]]:
    """(label, value) of the metric the Evaluator blessed the model on (components/evaluation/evaluator.py)."""
    blessing = (input_dict.get(standard_component_specs.MODEL_BLESSING_KEY) or [None])[0]
    if blessing is None or not blessing.has_custom_property(MAIN_METRIC):
        return None
    return blessing.get_string_custom_property(MAIN_METRIC), blessing.get_float_custom_property(MAIN_METRIC_VALUE)


class Pusher(base_component.BaseComponent):
    """TFX's Pusher component (same inputs, parameters and output) with PushExecutor and three more inputs."""

    SPEC_CLASS = PusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(PushExecutor)

    def __init__(self, model: types.BaseChannel, model_blessing: types.BaseChannel,
                 push_destination: pusher_pb2.PushDestination,
                 statistics: Optional[types.BaseChannel] = None, snapshot: Optional[types.BaseChannel] = None,
                 lease_root: Optional[str] = None, lease_owner: Optional[str] = None,
                 lease_ttl_seconds: Optional[float] = None, examples: Optional[types.BaseChannel] = None,
                 serving: Optional[str] = None):
        super().__init__(spec=PusherSpec(
            model=model, model_blessing=model_blessing, push_destination=push_destination,
            statistics=statistics, snapshot=snapshot, examples=examples, serving=serving,
            lease_root=lease_root or None,
            lease_owner=lease_owner or None, lease_ttl_seconds=lease_ttl_seconds if lease_owner else None,
            pushed_model=types.Channel(type=standard_artifacts.PushedModel)))
