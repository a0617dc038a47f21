"""The Tuner's executor: the local KerasTuner search or, given a trial job, a Vertex HyperparameterTuningJob; both
leave TFX's HyperParameters artifact, TFX's tuner_results.json and our record. (docs/tuning.md)"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

from tfx import types
from tfx.components.tuner import executor as tuner_executor
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils

from components.errors import TuningFailed
from components.tuner import LATEST_DIR_KEY, TRIAL_JOB_KEY, record, space

log = logging.getLogger(__name__)

BEST_KEY = standard_component_specs.BEST_HYPERPARAMETERS_KEY
RESULTS_KEY = standard_component_specs.TUNER_RESULTS_KEY


class Executor(tuner_executor.Executor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        custom = json_utils.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY, "null")) or {}
        tuning, cfg = space.section(custom)
        if TRIAL_JOB_KEY in custom:
            from components.tuner import vertex_job  # google-cloud-aiplatform: on Vertex only

            found = vertex_job.tune(input_dict, exec_properties, custom)
        else:
            # TFX's own search loop: tuner_fn (components/tuner/search.py), then KerasTuner's search.
            found = tuner_executor.search(input_dict, exec_properties, self._get_tmp_dir()).record()
        found = dataclasses.replace(found, run=(self._context.pipeline_run_id if self._context else None) or "")
        if found.best_trial is None:
            raise TuningFailed(f"no trial completed ({len(found.trials)} ran), so there is nothing to train with: "
                               + "; ".join(f"trial {t.id}: {t.error}" for t in found.trials if t.error))
        best = space.best_config(tuning.search_space, cfg, found.best_trial.values)
        write_outputs(output_dict, found, best)
        log.info("tuning: %s", found.describe())
        log.info("kept for tuning.reuse: latest in %s", record.publish_latest(custom[LATEST_DIR_KEY], found, best))


def write_outputs(output_dict: dict[str, list[types.Artifact]], found: record.TuningRecord, best: dict) -> None:
    """best_hyperparameters.txt (what the Trainer reads), TFX's tuner_results.json and our record."""
    best_dir = artifact_utils.get_single_uri(output_dict[BEST_KEY])
    io_utils.write_string_file(os.path.join(best_dir, record.BEST_FILE), json.dumps(best))
    record.write(artifact_utils.get_single_uri(output_dict[RESULTS_KEY]), found)
