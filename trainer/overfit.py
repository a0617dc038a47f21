"""Is training overfitting? Eval loss rising for a sustained stretch while train loss falls, read from the loop's
evaluations, with the input most likely memorised. docs/trainer.md (overfitting)."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

# Evaluations after the lowest eval loss, each above the one before or above the lowest by RISE: the stretch.
MIN_RISING_EVALS = 2
# The last eval loss at least this fraction above the lowest, and at least MIN_RISE above it (a near-perfect
# fit whose loss goes from 0.007 to 0.011, as penguins' does, is not worth a warning): a rise, not noise.
RISE = 0.10
MIN_RISE = 0.02
# A categorical input with at least this many ids, and at least this share of all categorical ids, dominates:
# the likeliest to be memorised (one id per few rows).
DOMINANT_IDS = 100
DOMINANT_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class OverfitDiagnosis:
    verdict: str  # overfitting | not overfitting | not measured
    best_step: Optional[int] = None    # the lowest eval loss
    best_eval_loss: Optional[float] = None
    last_step: Optional[int] = None
    last_eval_loss: Optional[float] = None
    train_loss_then: Optional[float] = None  # train loss at best_step and at the end (the last batch's)
    train_loss_last: Optional[float] = None
    suspect: str = ""  # the input most likely memorised, with its size; empty when none dominates

    def describe(self) -> str:
        if self.verdict == "not measured":
            return "not measured (fewer than 3 evaluations: raise trainer.train_steps or lower eval_every_steps)"
        if self.best_step == self.last_step:  # still falling: one point, not a stretch, to show
            return (f"{self.verdict}: eval loss lowest at the last evaluation, {self.last_eval_loss:.4f} at step "
                    f"{self.last_step}; train loss {self.train_loss_last:.4f}")
        text = (f"{self.verdict}: eval loss {self.best_eval_loss:.4f} at step {self.best_step}, "
                f"{self.last_eval_loss:.4f} at step {self.last_step}; train loss {self.train_loss_then:.4f} -> "
                f"{self.train_loss_last:.4f}")
        if self.verdict == "overfitting":
            text += ("; trainer.export=best keeps the best evaluation's weights. Regularise: "
                     "trainer.early_stopping_patience, trainer.dropout, trainer.l2")
            if self.suspect:
                text += f"; likely memorised: {self.suspect} (features.min_frequency, or ignore it)"
        return text


def diagnose(history: Sequence[dict], categorical_sizes: Optional[dict[str, int]] = None) -> OverfitDiagnosis:
    """`history`: the loop's records, one per evaluation, with `step`, `loss` and `eval_loss`."""
    evals = [h for h in history if "eval_loss" in h and "loss" in h]
    if len(evals) < 3:
        return OverfitDiagnosis("not measured")
    best = min(range(len(evals)), key=lambda i: evals[i]["eval_loss"])
    after = evals[best + 1:]
    low = evals[best]["eval_loss"]
    rising = sum(1 for i, h in enumerate(after)
                 if h["eval_loss"] > (after[i - 1]["eval_loss"] if i else low) or h["eval_loss"] > low * (1 + RISE))
    last = evals[-1]
    risen = last["eval_loss"] >= max(low * (1 + RISE), low + MIN_RISE)
    overfitting = (len(after) >= MIN_RISING_EVALS and rising == len(after) and risen
                   and last["loss"] < evals[best]["loss"])
    return OverfitDiagnosis("overfitting" if overfitting else "not overfitting", evals[best]["step"], low,
                            last["step"], last["eval_loss"], evals[best]["loss"], last["loss"],
                            suspect(categorical_sizes or {}) if overfitting else "")


def suspect(sizes: dict[str, int]) -> str:
    """The categorical input with the most ids, when it dominates the others."""
    if not sizes:
        return ""
    name, size = max(sizes.items(), key=lambda kv: kv[1])
    if size >= DOMINANT_IDS and size >= DOMINANT_SHARE * sum(sizes.values()):
        return f"{name.removesuffix('_xf')} ({size:,} ids)"
    return ""
