"""Pusher: TFX's filesystem Pusher with two changes for a directory TF Serving watches.

1. Nothing new, nothing pushed. A plain rerun is served from cache up to and
   including the Pusher (components/baseline.py); but a candidate can still be
   the model serving now in another guise (retrained bit-identically with
   caching off), and TFX's
   Pusher would copy it again under a new version: TF Serving loads a
   duplicate. Here a blessed candidate whose files are byte-identical to the
   version serving now is not pushed; the PushedModel artifact says
   `pushed=0` and names the serving version in `unchanged_version`.
2. Whole pushes: a version appears complete or not at all
   (components/serving_dir.py says how, locally and on GCS).

Everything else (blessing check, model path, the archive copy in the
PushedModel artifact, its custom properties) is TFX's.
"""

from __future__ import annotations

import logging
from typing import Any

from tfx import types
from tfx.components.pusher import executor as tfx_pusher_executor
from tfx.components.pusher.component import Pusher as TfxPusher
from tfx.dsl.components.base import executor_spec
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, proto_utils

from components import serving_dir

UNCHANGED_VERSION = "unchanged_version"


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

        serving_dir.clear_staging(base)
        current = serving_dir.serving(base)
        if current is not None and serving_dir.tree_digest(current.path) == serving_dir.tree_digest(model_path):
            logging.info("the candidate is identical to serving version %s; pushing nothing", current.name)
            self._MarkNotPushed(model_push)
            model_push.set_string_custom_property(UNCHANGED_VERSION, current.name)
            return
        version = serving_dir.next_version(base)
        serving_path = serving_dir.publish(model_path, base, version)
        logging.info("model published whole as %s", serving_path)
        io_utils.copy_dir(model_path, model_push.uri)
        self._MarkPushed(model_push, pushed_destination=serving_path, pushed_version=str(version))


class Pusher(TfxPusher):
    """TFX's Pusher component, same spec and outputs, with PushExecutor."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(PushExecutor)
