"""The Tuner (TFX's Tuner component with our executor) and LatestTuning, the last search's result without a search
(tuning.reuse: latest). Why and sources: docs/tuning.md."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

from tfx import types
from tfx.components.tuner import component as tuner_component
from tfx.dsl.components.base import base_component, base_driver, base_executor, executor_spec
from tfx.proto.orchestration import driver_output_pb2
from tfx.types import artifact_utils, component_spec, standard_artifacts

from components.errors import NoTuningToReuse
from components.tuner import record
from components.tuner.executor import BEST_KEY, RESULTS_KEY, Executor, write_outputs

log = logging.getLogger(__name__)
TUNING_DIR, LATEST_KEY = "tuning_dir", "latest_key"


class Tuner(tuner_component.Tuner):
    """TFX's Tuner (its spec, channels and HyperParameters output) with an executor that trains trials with our
    loop locally and submits a HyperparameterTuningJob on Vertex (components/tuner/executor.py)."""
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)


class LatestTuningSpec(types.ComponentSpec):
    PARAMETERS = {
        TUNING_DIR: component_spec.ExecutionParameter(type=str),  # pipeline.root/tuning/<pipeline name>
        # Set by the driver at run time (local runs): the last search's digest, so a new search is a cache miss.
        LATEST_KEY: component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {}
    OUTPUTS = {BEST_KEY: component_spec.ChannelParameter(type=standard_artifacts.HyperParameters),
               RESULTS_KEY: component_spec.ChannelParameter(type=standard_artifacts.TunerResults)}


class LatestTuningExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        found = record.latest(exec_properties[TUNING_DIR])
        if found is None:
            raise NoTuningToReuse(f"tuning.reuse: latest, but no search has run on this root (nothing in "
                                  f"{os.path.join(exec_properties[TUNING_DIR], record.LATEST_FILE)}): run once "
                                  "without tuning.reuse")
        searched, best = found
        write_outputs(output_dict, dataclasses.replace(searched, reused=True), best)
        artifact_utils.get_single_instance(output_dict[BEST_KEY]).set_string_custom_property("reused_from",
                                                                                               searched.run)
        log.info("tuning.reuse: latest: %s; values %s", searched.describe(), json.dumps(best.get("values")))


class LatestTuningDriver(base_driver.BaseDriver):
    """Local runs: the last search's digest into `latest_key`, part of the cache key (as
    components/training_record.py ServingVersionDriver does for the serving version). Vertex runs no custom
    drivers: there the task is never cached (pipeline/spec/cache_rule.py)."""

    def run(self, execution_info) -> driver_output_pb2.DriverOutput:
        result = driver_output_pb2.DriverOutput()
        result.exec_properties[LATEST_KEY].string_value = record.latest_key(execution_info.exec_properties[TUNING_DIR])
        return result


class LatestTuning(base_component.BaseComponent):
    SPEC_CLASS = LatestTuningSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(LatestTuningExecutor)
    DRIVER_CLASS = LatestTuningDriver

    def __init__(self, tuning_dir: str):
        super().__init__(LatestTuningSpec(tuning_dir=tuning_dir,
                                          best_hyperparameters=types.Channel(type=standard_artifacts.HyperParameters),
                                          tuner_results=types.Channel(type=standard_artifacts.TunerResults)))
