"""TFX Trainer entry point: glue between TFX's FnArgs and the plain-TF loop."""

from __future__ import annotations

import logging
import os
import shutil

import tensorflow as tf
import tensorflow_transform as tft

from trainer.config import TrainerConfig
from trainer.data import record_dataset_fn
from trainer.export import export_serving_model
from trainer.loop import train
from trainer.spec import training_spec
from trainer.strategy import chief_or_temp_dir, is_chief, make_strategy

log = logging.getLogger(__name__)

# Key under which the pipeline passes the trainer section in custom_config.
CONFIG_KEY = "trainer"


class PreemptedError(RuntimeError):
    """Training stopped on SIGTERM after saving a checkpoint; a restart resumes it."""


def run_fn(fn_args) -> None:
    cfg = TrainerConfig.model_validate(fn_args.custom_config[CONFIG_KEY])
    strategy = make_strategy(cfg.strategy, cfg.tpu)
    tft_output = tft.TFTransformOutput(fn_args.transform_output)
    spec = tft_output.transformed_feature_spec()

    data = training_spec(fn_args.custom_config, tft_output, fn_args.train_files)

    def model_fn():
        return data.build_model(cfg)

    label = data.layout.label
    train_fn = record_dataset_fn(fn_args.train_files, spec, cfg.global_batch_size, label=label, training=True,
                                 seed=cfg.seed, micro_batches=cfg.gradient_accumulation_steps)
    eval_fn = record_dataset_fn(fn_args.eval_files, spec, cfg.global_batch_size, label=label, training=False,
                                max_batches=cfg.eval_batches,
                                drop_remainder=isinstance(strategy, tf.distribute.TPUStrategy))

    result = train(strategy, cfg, model_fn, train_fn, eval_fn,
                   checkpoint_dir=cfg.checkpoint_dir or os.path.join(fn_args.model_run_dir, "checkpoints"),
                   logdir=fn_args.model_run_dir, task=data.task)
    if result.preempted:
        raise PreemptedError(f"preempted at step {result.step}; restart the job to resume")
    # Every worker exports (a collective), only the chief's copy lands where Pusher looks.
    export_dir = chief_or_temp_dir(strategy, fn_args.serving_model_dir, "export")
    export_serving_model(result.model, tft_output, data.task, data.resolved, export_dir)
    if not is_chief(strategy):
        shutil.rmtree(export_dir, ignore_errors=True)
    log.info("exported %s after %d steps", export_dir, result.step)
