"""How the training curve reads, as a person would read it: overfitting (eval loss well above its lowest while train
loss fell, by more than its own standard error), noisy (eval loss well above its lowest, but train loss rose with
it), still improving (eval loss still falling when the budget ran out), or none of these; from the loop's
evaluations, with the numbers the verdict rests on. docs/trainer.md (overfitting)."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Optional, Sequence

# The end of the curve is the median of up to this many evaluations after the lowest: one late spike is not a trend.
END_EVALS = 3
# Overfitting: that end at least this fraction above the lowest eval loss, while train loss fell (noisy: while it
# did not).
RISE = 0.10
# ... and by more than this many standard errors of the eval loss over its rows (the end's median): a rise other
# rows like these could show by chance is not overfitting. Two, as a person reads an interval; one evaluation's
# error overstates that of a difference between two on the same rows, so this errs toward "not overfitting".
NOISE_SES = 2
# Still improving: the last evaluation the lowest, or the best of the last two at least this fraction below the best
# before them.
STILL_FALLING = 0.005
# A categorical input with at least this many ids, and at least this share of all categorical ids, dominates:
# the likeliest to be memorised (one id per few rows).
DOMINANT_IDS = 100
DOMINANT_SHARE = 0.5
# What to raise when the curve was still falling, by why the loop stopped (trainer/budget.py STOP_REASONS).
_RAISE = {"time": "trainer.max_train_seconds", "steps": "trainer.train_steps", "passes": "trainer.max_passes"}


@dataclasses.dataclass(frozen=True)
class OverfitDiagnosis:
    verdict: str  # overfitting | noisy | still improving | not overfitting | not measured
    best_step: Optional[int] = None    # the lowest eval loss
    best_eval_loss: Optional[float] = None
    last_step: Optional[int] = None
    last_eval_loss: Optional[float] = None  # the end of the curve: the median of up to END_EVALS after the lowest
    train_loss_then: Optional[float] = None  # train loss at best_step and at the end (the same evaluations)
    train_loss_last: Optional[float] = None
    suspect: str = ""  # the input most likely memorised, with its size; empty when none dominates
    end_evals: int = 1  # evaluations the end is the median of
    raise_key: str = ""  # still improving: the budget key to raise
    first_eval_loss: Optional[float] = None  # still improving: where the curve started
    first_step: Optional[int] = None
    noise: Optional[float] = None  # the eval loss's standard error at the end, when the loop measured it
    eval_examples: Optional[int] = None

    @property
    def rise(self) -> float:
        return self.last_eval_loss / self.best_eval_loss - 1 if self.best_eval_loss else 0.0

    def describe(self) -> str:
        if self.verdict == "not measured":
            return "not measured (fewer than 3 evaluations: raise trainer.train_steps or lower eval_every_steps)"
        if self.verdict == "still improving":
            return (f"still improving: stopped at the budget (raise {self.raise_key}): eval loss "
                    f"{self.first_eval_loss:.4f} at step {self.first_step}, {self.best_eval_loss:.4f} at step "
                    f"{self.best_step}, still falling; train loss {self.train_loss_last:.4f}")
        if self.best_step == self.last_step:
            return (f"{self.verdict}: eval loss lowest at the last evaluation, {self.best_eval_loss:.4f} at step "
                    f"{self.best_step}; train loss {self.train_loss_last:.4f}")
        end = (f"{self.last_eval_loss:.4f} at step {self.last_step}" if self.end_evals == 1 else
               f"{self.last_eval_loss:.4f} over the last {self.end_evals} evaluations (median, to step "
               f"{self.last_step})")
        text = (f"{self.verdict}: eval loss {self.best_eval_loss:.4f} at step {self.best_step}, {end} "
                f"({self.rise:+.0%}); train loss {self.train_loss_then:.4f} -> {self.train_loss_last:.4f}")
        if self.verdict == "not overfitting" and self.rise >= RISE:
            text += (f": the rise is within {NOISE_SES} standard errors of the eval loss ({self.noise:.4f} each over "
                     f"{self.eval_examples:,} eval rows), so chance")
        if self.verdict == "noisy":
            text += (": train loss rose with it, so not overfitting; the learning rate keeps the fit from settling "
                     "(trainer.learning_rate, trainer.decay)")
        if self.verdict == "overfitting":
            text += ("; trainer.export=best keeps the best evaluation's weights. Regularise: "
                     "trainer.early_stopping_patience, trainer.dropout, trainer.l2")
            if self.suspect:
                text += f"; likely memorised: {self.suspect} (features.min_frequency, or ignore it)"
        return text


def diagnose(history: Sequence[dict], categorical_sizes: Optional[dict[str, int]] = None,
             budget=None) -> OverfitDiagnosis:
    """`history`: the loop's records, one per evaluation, with `step`, `loss` and `eval_loss`. `budget`
    (trainer/budget.py Budget): why the loop stopped; without it the budget is taken to have run out."""
    evals = [h for h in history if "eval_loss" in h and "loss" in h]
    if len(evals) < 3:
        return OverfitDiagnosis("not measured")
    losses = [h["eval_loss"] for h in evals]
    best = min(range(len(evals)), key=lambda i: losses[i])
    tail = evals[best + 1:][-END_EVALS:]
    low, last = losses[best], evals[-1]
    end = statistics.median(h["eval_loss"] for h in tail) if tail else low
    train_end = statistics.median(h["loss"] for h in tail) if tail else last["loss"]
    found = OverfitDiagnosis("not overfitting", evals[best]["step"], low, last["step"], end,
                             evals[best]["loss"], train_end, end_evals=max(1, len(tail)))
    if tail and end >= low * (1 + RISE):
        if all("eval_loss_se" in h for h in tail):
            noise = statistics.median(h["eval_loss_se"] for h in tail)
            if end - low <= NOISE_SES * noise:
                return dataclasses.replace(found, noise=noise, eval_examples=tail[-1].get("eval_examples"))
        if train_end < evals[best]["loss"]:
            return dataclasses.replace(found, verdict="overfitting", suspect=suspect(categorical_sizes or {}))
        return dataclasses.replace(found, verdict="noisy")
    stop = getattr(budget, "stop", "budget")
    falling = best == len(evals) - 1 or min(losses[-2:]) < (1 - STILL_FALLING) * min(losses[:-2])
    if stop in ("budget", "time") and falling:
        knob = "time" if stop == "time" else "passes" if getattr(budget, "by_passes", False) else "steps"
        return dataclasses.replace(found, verdict="still improving", raise_key=_RAISE[knob],
                                   first_eval_loss=losses[0], first_step=evals[0]["step"])
    return found


def suspect(sizes: dict[str, int]) -> str:
    """The categorical input with the most ids, when it dominates the others."""
    if not sizes:
        return ""
    name, size = max(sizes.items(), key=lambda kv: kv[1])
    if size >= DOMINANT_IDS and size >= DOMINANT_SHARE * sum(sizes.values()):
        return f"{name.removesuffix('_xf')} ({size:,} ids)"
    return ""
