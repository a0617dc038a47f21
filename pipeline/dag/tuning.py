"""The tuning step before the Trainer: the Tuner (a search), LatestTuning (tuning.reuse: latest) or none.
Why and sources: docs/tuning.md."""

from __future__ import annotations

from typing import Any, Optional

from tfx.dsl.components.base.base_node import BaseNode
from tfx.proto import trainer_pb2, tuner_pb2

from components.splits import EVAL, TRAIN
from components.tuner import LATEST_DIR_KEY, LATEST_TUNING_ID, TRIAL_JOB_KEY, TUNER_ID, TUNING_KEY
from pipeline.config import Config, join
from pipeline.dag.vertex_training import trainer_custom_config, vertex_extension
from trainer.run_fn import CONFIG_KEY

TUNER_FN = "components.tuner.search.tuner_fn"


def tuning_dir(config: Config) -> str:
    """Where the last search's result is kept for tuning.reuse: latest (components/tuner/record.py)."""
    return join(config.pipeline.root_uri, "tuning", config.pipeline.name)


def tuning_step(config: Config, examples, transform_graph, schema, custom_config: dict[str, Any]) -> Optional[BaseNode]:
    """The node whose best_hyperparameters the Trainer takes; None without a tuning section. Imported here, not
    at the top: TFX's Tuner imports KerasTuner (seconds), which a run without tuning never needs."""
    tuning = config.tuning
    if tuning is None:
        return None
    from components.tuner.component import LatestTuning, Tuner

    if tuning.reuse == "latest":
        return LatestTuning(tuning_dir=tuning_dir(config)).with_id(LATEST_TUNING_ID)
    return Tuner(examples=examples, transform_graph=transform_graph, schema=schema, tuner_fn=TUNER_FN,
                 # TFX's defaults made explicit: trials train on the train split and score on the eval split,
                 # as the Trainer does; the loop counts its own steps (trainer.train_steps).
                 train_args=trainer_pb2.TrainArgs(splits=[TRAIN]), eval_args=trainer_pb2.EvalArgs(splits=[EVAL]),
                 tune_args=tuner_pb2.TuneArgs(num_parallel_trials=tuning.parallel_trials),
                 custom_config={**custom_config, **tuner_custom_config(config)}).with_id(TUNER_ID)


def tuner_custom_config(config: Config) -> dict[str, Any]:
    """The trainer and tuning sections and, on Vertex, the trials' CustomJob: the Trainer's own (image, pool,
    PJRT env, service account, scheduling: trainer_custom_config), under a key of its own so that nothing takes
    the Tuner for TFX's Vertex Trainer (pipeline/vertex/preflight.py trainer_pools)."""
    trainer = trainer_custom_config(config)
    custom = {CONFIG_KEY: trainer[CONFIG_KEY], TUNING_KEY: config.tuning.model_dump(),
              LATEST_DIR_KEY: tuning_dir(config)}
    if config.vertex is not None:
        ext = vertex_extension()
        custom[TRIAL_JOB_KEY] = {**trainer[ext.TRAINING_ARGS_KEY], "region": trainer[ext.VERTEX_REGION_KEY]}
    return custom
