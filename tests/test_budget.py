"""The training budget (trainer/budget.py): the plan from the table's size, the step budget kept as it was, what
the summary says, and the config's refusals of budgets that cannot both hold."""

from __future__ import annotations

import pytest

from pipeline.config import load_config
from pipeline.errors import ConfigError
from trainer import budget
from trainer.budget import Budget, plan
from trainer.config import TrainerConfig


def _rows(n):
    def count():
        count.calls += 1
        return n
    count.calls = 0
    return count


def test_an_explicit_train_steps_keeps_the_step_budget_as_it_was_and_counts_no_rows():
    rows = _rows(10**6)
    cfg, found = plan(TrainerConfig(train_steps=400), rows, replicas=1)
    assert rows.calls == 0
    assert (cfg.train_steps, cfg.global_batch_size, cfg.eval_every_steps, cfg.checkpoint_every_steps,
            cfg.early_stopping_patience, cfg.warmup_steps, cfg.learning_rate, cfg.decay) == (
        400, 32, 100, 100, 0, 0, 0.01, "none")
    assert not found.by_passes and found.max_steps == 400
    # A key the config sets wins over the step budget's default.
    cfg, _ = plan(TrainerConfig(train_steps=400, global_batch_size=256, early_stopping_patience=3), rows, 1)
    assert (cfg.global_batch_size, cfg.early_stopping_patience) == (256, 3)


@pytest.mark.parametrize("rows, replicas, micro, batch, per_pass, max_passes, eval_every", [
    # nycflights13's training split: a batch of sqrt(rows), a pass of as many steps, evaluated every pass.
    (261_807, 1, 1, 512, 512, 30, 512),
    # penguins: the smallest batch, and more passes so the budget holds MIN_STEPS steps; evaluated every 5 passes.
    (230, 1, 1, 32, 8, 250, 40),
    # 8 TPU cores: per-replica batches of a multiple of 8, so the global batch is a multiple of 64.
    (261_807, 8, 1, 512, 512, 30, 512),
    (3_000, 8, 1, 64, 47, 43, 47),
    # Gradient accumulation: whole micro-batches of a multiple of 8 on each replica.
    (50_000, 2, 2, 224, 224, 30, 224),
    # A very large table: the batch stops growing.
    (50_000_000, 1, 1, 2048, 24_415, 30, 24_415),
])
def test_the_pass_budget_grows_the_batch_with_the_table(rows, replicas, micro, batch, per_pass, max_passes,
                                                        eval_every):
    cfg, found = plan(TrainerConfig(gradient_accumulation_steps=micro), _rows(rows), replicas)
    assert (cfg.global_batch_size, found.steps_per_pass, found.max_passes, cfg.eval_every_steps) == (
        batch, per_pass, max_passes, eval_every)
    assert cfg.global_batch_size % (replicas * micro * budget.BATCH_MULTIPLE) == 0
    assert cfg.train_steps == found.max_steps == per_pass * max_passes
    assert cfg.early_stopping_patience == budget.PATIENCE and cfg.decay == "plateau"
    assert cfg.checkpoint_every_steps == cfg.eval_every_steps  # a checkpoint at each evaluation
    assert 1 <= cfg.warmup_steps <= per_pass


def test_the_pass_budget_keeps_what_the_config_sets():
    cfg, found = plan(TrainerConfig(max_passes=5, global_batch_size=100, early_stopping_patience=0, decay="none",
                                    learning_rate=0.001, max_train_seconds=60), _rows(1_000), 1)
    assert (cfg.global_batch_size, cfg.train_steps, cfg.early_stopping_patience, cfg.decay, cfg.learning_rate) == (
        100, 50, 0, "none", 0.001)
    assert found.max_seconds == 60 and found.max_passes == 5


def test_the_summary_says_how_much_it_trained_and_why_it_stopped():
    _, found = plan(TrainerConfig(), _rows(1_200_000), 1)
    ended = found.ended(steps=found.steps_per_pass * 7, stop="early", exported_step=found.steps_per_pass * 2)
    assert ended.describe() == ("stopped in pass 7 of at most 30: eval loss no better for 5 evaluations; exported "
                                "pass 2 (2.4M examples); batch 1,096, 1,095 steps a pass over 1,200,000 rows")
    timed = Budget(True, 10_000, 96, 3_150, 105, 5, max_seconds=600).ended(630, "time", 525)
    assert timed.describe().startswith("stopped in pass 6 of at most 30: the wall-clock cap "
                                       "(trainer.max_train_seconds 600) ran out; exported pass 5 (50.4k examples)")
    steps = Budget(False, 0, 32, 400, 100, 0).ended(400, "budget", 300)
    assert steps.describe() == ("trained 400 of 400 steps (trainer.train_steps) at batch 32; exported step 300 "
                                "(9.6k examples)")


@pytest.mark.parametrize("overrides, message", [
    (["trainer.train_steps=1000", "trainer.max_passes=3"], "train_steps (1000) and max_passes (3) are two budgets"),
    (["trainer.train_steps=50"], "trainer.eval_every_steps (100, the default) exceeds trainer.train_steps (50)"),
    (["trainer.max_passes=3", "tuning.trials=2", "tuning.space={train_steps: {values: [200, 400]}}"],
     "tuning.space.train_steps gives each trial a step budget, and trainer.max_passes (3) a pass budget"),
    (["trainer.max_train_seconds=0"], "trainer.max_train_seconds"),
])
def test_budgets_that_cannot_both_hold_are_refused_naming_them(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(None, overrides)
    # The pass budget alone, and the step budget alone, are fine.
    assert load_config(None, ["trainer.max_passes=3"]).trainer.train_steps is None
