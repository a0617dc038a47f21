"""ServingModel: the model serving now, as a Model artifact: the Evaluator's baseline and the warm-start base.
Why and sources: docs/internals.md."""

from __future__ import annotations

import logging
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.types import artifact_utils, component_spec, standard_artifacts
from tfx.utils import io_utils, path_utils

from components import training_record

SERVING_DIR, SERVING_VERSION, MODEL_KEY = training_record.SERVING_DIR, training_record.SERVING_VERSION, "model"
EMPTY, MODEL_URI = "empty", "model_uri"


def is_empty(model: types.Artifact) -> bool:
    """Whether a Model artifact is this component's "nothing serving" output."""
    return model.has_custom_property(EMPTY) and model.get_int_custom_property(EMPTY) == 1


class ServingModelSpec(types.ComponentSpec):
    PARAMETERS = {
        # The directory TF Serving watches (pipeline.serving_dir).
        SERVING_DIR: component_spec.ExecutionParameter(type=str),
        # Set by the driver at run time (local runs): part of the cache key, see the module docstring.
        SERVING_VERSION: component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {}
    OUTPUTS = {MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model)}


class ServingModelExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        base = exec_properties[SERVING_DIR]
        model = artifact_utils.get_single_instance(output_dict[MODEL_KEY])
        current, record = training_record.serving_record(base)
        if current is None:
            logging.info("serving model: none in %s yet; no baseline, no warm start", base)
            model.set_int_custom_property(EMPTY, 1)
            return
        io_utils.copy_dir(current.path, path_utils.serving_model_dir(model.uri))
        model.set_int_custom_property(EMPTY, 0)
        model.set_string_custom_property(SERVING_VERSION, current.name)
        if record is not None:
            model.set_string_custom_property(MODEL_URI, record.model_uri)
        logging.info("serving model: version %s (%s)", current.name,
                     record.describe() if record else "pushed before training-data records were kept")


class ServingModel(base_component.BaseComponent):
    SPEC_CLASS = ServingModelSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(ServingModelExecutor)
    DRIVER_CLASS = training_record.ServingVersionDriver

    def __init__(self, serving_dir: str):
        super().__init__(ServingModelSpec(serving_dir=serving_dir,
                                          model=types.Channel(type=standard_artifacts.Model)))
