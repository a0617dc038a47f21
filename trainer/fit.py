"""One training job: strategy, input, the loop, and the chief's export. Why: docs/internals.md."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from typing import Callable, Optional

import tensorflow as tf
import tf_keras

from trainer import budget as budgets
from trainer import sizing
from trainer.budget import Budget
from trainer.config import TrainerConfig
from trainer.data import list_files, record_counts, record_dataset_fn
from trainer.features import ModelLayout
from trainer.loop import TrainResult, train
from trainer.strategy import chief_or_temp_dir, is_chief, make_strategy
from trainer.tasks import Task

log = logging.getLogger("trainer.loop")  # the loop's report (pipeline/local/progress.py shows it)


@dataclasses.dataclass(frozen=True)
class TransformedData:
    """Transform's materialised examples and what the model needs to know about them."""
    train_files: str | list[str]  # globs of gzipped TFRecords
    eval_files: str | list[str] | None  # None: no evaluation
    feature_spec: dict
    label: str  # the transformed label feature, split off as the labels
    task: Task  # loss, metric (trainer/tasks.py)
    # model_fn(the planned config) -> the model, called under the strategy's scope.
    model_fn: Callable[[TrainerConfig], tf_keras.Model]
    layout: Optional[ModelLayout] = None  # the model's inputs, to size it (trainer/sizing.py); None: not sized


@dataclasses.dataclass(frozen=True)
class Fitted:
    result: TrainResult
    chief: bool
    replicas: int
    export_dir: Optional[str]  # where this worker exported (a removed temp dir off the chief); None: no export
    budget: Optional[Budget] = None  # what the run was allowed and how it ended (trainer/budget.py)
    model: str = ""  # the model's size and L2, and why (trainer/sizing.py); empty: no layout to size it by


# (model, directory): write the trained model as a SavedModel.
ExportFn = Callable[[tf_keras.Model, str], object]


def fit_and_export(cfg: TrainerConfig, read_data: Callable[[], TransformedData], *,
                   checkpoint_dir: str, logdir: Optional[str],
                   export_dir: Optional[str], export: ExportFn,
                   init_model: Optional[Callable[[tf_keras.Model], object]] = None,
                   strategy: Optional[tf.distribute.Strategy] = None) -> Fitted:
    """Train under the strategy cfg.strategy picks, then export unless preempted.

    `read_data` runs only once the strategy exists: TPU and multi-worker set-up
    must come before anything else uses TF, and reading a vocabulary may.
    With `export_dir` None nothing is exported. `init_model` (e.g. a warm start)
    gets the freshly built model before training; a resumed checkpoint still wins. `strategy`: one built
    already (a search's trials share one: a TPU system is initialized once per process).
    """
    strategy = strategy or make_strategy(cfg.strategy, cfg.tpu, cfg.require_accelerator)
    data = read_data()
    cfg, plan = budgets.plan(cfg, lambda: sum(record_counts(list_files(data.train_files))),
                             strategy.num_replicas_in_sync)
    cfg, model = _sized(cfg, data.layout, plan.rows)
    train_fn = record_dataset_fn(data.train_files, data.feature_spec, cfg.global_batch_size, label=data.label,
                                 training=True,
                                 seed=cfg.seed, micro_batches=cfg.gradient_accumulation_steps)
    eval_fn = None
    if data.eval_files is not None:
        # Padded, weighted batches: static shapes on every strategy, and every row counted.
        eval_fn = record_dataset_fn(data.eval_files, data.feature_spec, cfg.global_batch_size, label=data.label,
                                    training=False, max_batches=cfg.eval_batches)

    def model_fn():
        model = data.model_fn(cfg)
        if init_model is not None:
            init_model(model)
        return model

    result = train(strategy, cfg, model_fn, train_fn, eval_fn, checkpoint_dir=checkpoint_dir, logdir=logdir,
                   task=data.task)
    plan = plan.ended(result.step, result.stop, result.exported.step if result.exported else None)
    log.info("budget: %s", plan.describe())
    exported = None
    if export_dir and not result.preempted:
        exported = _export_from_chief(strategy, result.model, export_dir, export)
    return Fitted(result, is_chief(strategy), strategy.num_replicas_in_sync, exported, plan, model)


def _sized(cfg: TrainerConfig, layout: Optional[ModelLayout], rows: int) -> tuple[TrainerConfig, str]:
    """`cfg` with its hidden widths and L2 set (those the config leaves empty, from the layout and the rows), and
    the model's size as the summary says it."""
    if layout is None:
        return cfg.model_copy(update={"l2": sizing.STEP_L2 if cfg.l2 is None else cfg.l2}), ""
    sized = sizing.size(layout, cfg.hidden_units)
    l2, why = (cfg.l2, "trainer.l2") if cfg.l2 is not None else sizing.l2(sized, rows)
    described = sized.describe(l2, why)
    log.info("model: %s", described)
    return cfg.model_copy(update={"hidden_units": list(sized.hidden_units), "l2": l2}), described


def _export_from_chief(strategy: tf.distribute.Strategy, model: tf_keras.Model, export_dir: str,
                       export: ExportFn) -> str:
    """Every worker exports (a collective); only the chief's copy lands in `export_dir`."""
    target = chief_or_temp_dir(strategy, export_dir, "export")
    export(model, target)
    if not is_chief(strategy):
        shutil.rmtree(target, ignore_errors=True)
    return target
