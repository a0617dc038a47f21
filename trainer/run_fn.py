"""TFX Trainer entry point: glue between TFX's FnArgs and trainer.fit."""

from __future__ import annotations

import logging
import os
import time
from typing import Optional

import tensorflow as tf
import tensorflow_transform as tft

from trainer import outcome, overfit, tuning
from trainer.config import TrainerConfig
from trainer.errors import PreemptedError
from trainer.export import export_serving_model
from trainer.fit import TransformedData, fit_and_export
from trainer.spec import TrainingSpec, training_spec
from trainer.warm_start import warm_start

log = logging.getLogger(__name__)

# Key under which the pipeline passes the trainer section in custom_config.
CONFIG_KEY = "trainer"
# How long a worker waits for the chief's export before its replica fails.
CHIEF_EXPORT_WAIT_SECONDS = 600


def _warm_start(cfg: TrainerConfig, fn_args, tft_output: tft.TFTransformOutput):
    if not cfg.warm_start:
        return None
    # TFX hands the base_model channel (the model serving now, components/serving/serving_model.py) over as its
    # Format-Serving dir; with nothing serving that artifact is empty and the dir holds no SavedModel.
    base = getattr(fn_args, "base_model", None)
    assets = os.path.join(tft_output.transform_savedmodel_dir, "assets")
    return lambda model: warm_start(model, base, assets)


class FnArgsData:
    """Transform's output as TFX's FnArgs names it, read once the strategy exists (trainer/fit.py): what the
    Trainer and a tuning trial (trainer/trial.py) train on. `spec` is set once read; the export needs it."""

    def __init__(self, fn_args, cfg: TrainerConfig):
        self.fn_args, self.cfg = fn_args, cfg
        self.tft_output = tft.TFTransformOutput(fn_args.transform_graph_path)  # the Trainer's and the Tuner's
        self.spec: Optional[TrainingSpec] = None

    def __call__(self) -> TransformedData:
        fn_args = self.fn_args
        self.spec = spec = training_spec(fn_args.custom_config, self.tft_output, fn_args.train_files)
        return TransformedData(fn_args.train_files, fn_args.eval_files, self.tft_output.transformed_feature_spec(),
                               label=spec.layout.label, task=spec.task, model_fn=spec.build_model,
                               layout=spec.layout)


def trainer_config(fn_args) -> TrainerConfig:
    """The trainer section, with the tuned values when the Trainer takes a HyperParameters artifact (TFX reads
    its best_hyperparameters.txt into fn_args.hyperparameters: KerasTuner's config, {"space", "values"})."""
    cfg = TrainerConfig.model_validate(fn_args.custom_config[CONFIG_KEY])
    tuned = getattr(fn_args, "hyperparameters", None)
    if tuned:
        cfg = tuning.apply(cfg, tuned.get("values", {}))
        log.info("hyperparameters from the tuning: %s", tuned.get("values", {}))
    return cfg


def run_fn(fn_args) -> None:
    cpu_start = time.process_time()  # the Trainer's CPU seconds, for the run's cost (pipeline/runs/cost.py)
    cfg = trainer_config(fn_args)
    data = FnArgsData(fn_args, cfg)
    fitted = fit_and_export(
        cfg, data,
        checkpoint_dir=cfg.checkpoint_dir or os.path.join(fn_args.model_run_dir, "checkpoints"),
        logdir=fn_args.model_run_dir, export_dir=fn_args.serving_model_dir,
        export=lambda model, directory: export_serving_model(model, data.tft_output, data.spec.task,
                                                             data.spec.resolved, directory),
        init_model=_warm_start(cfg, fn_args, data.tft_output))
    if fitted.result.preempted:
        raise PreemptedError(f"preempted at step {fitted.result.step}; restart the job to resume")
    log.info("exported %s after %d steps: %s", fitted.export_dir, fitted.result.step,
             fitted.result.exported.describe())
    fit = overfit.diagnose(fitted.result.history, {c.name: c.size for c in data.spec.layout.categorical},
                           fitted.budget)
    log.info("fit: %s", fit.describe())
    if fitted.chief:  # the summary and the report read it from the ModelRun artifact
        outcome.write(fn_args.model_run_dir, outcome.Outcome(
            fitted.result.exported, fitted.result.input, fitted.result.loop_seconds,
            time.process_time() - cpu_start, fit, fitted.budget, fitted.model))
    if not fitted.chief:
        # TFX's Trainer executor fails any replica whose serving_model_dir is missing after run_fn,
        # and only the chief writes it: without waiting, a worker that finishes first fails the job.
        _wait_for_export(fn_args.serving_model_dir, CHIEF_EXPORT_WAIT_SECONDS)


def _wait_for_export(directory: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not tf.io.gfile.exists(os.path.join(directory, "saved_model.pb")):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the chief's model did not appear in {directory} within {timeout:.0f}s")
        time.sleep(1.0)
