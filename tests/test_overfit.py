"""The overfitting verdict (trainer/overfit.py) on evaluation histories shaped like real runs', and its record."""

from __future__ import annotations

from trainer import outcome
from trainer.outcome import ExportChoice, Outcome
from trainer.overfit import diagnose


def _history(train, evals):
    return [{"step": 100 * (i + 1), "loss": t, "eval_loss": e} for i, (t, e) in enumerate(zip(train, evals))]


# The messy customer table's run before column roles were inferred: a date vocabulary memorised, eval loss
# 0.81 -> 2.09 while train loss fell.
MEMORISED = _history([0.62, 0.35, 0.12, 0.05], [0.81, 1.05, 1.60, 2.09])
SIZES = {"signup_date_xf": 1_023, "plan_xf": 5, "region_xf": 9}


def test_eval_loss_rising_while_train_loss_falls_is_overfitting_and_names_the_dominant_input():
    found = diagnose(MEMORISED, SIZES)
    assert (found.verdict, found.best_step, found.last_step) == ("overfitting", 100, 400)
    assert found.suspect == "signup_date (1,023 ids)"
    text = found.describe()
    assert text.startswith("overfitting: eval loss 0.8100 at step 100, 2.0900 at step 400; train loss 0.6200 -> 0.0500")
    assert "likely memorised: signup_date (1,023 ids)" in text and "trainer.early_stopping_patience" in text
    # No input dominates: the verdict stands, nothing is named.
    assert diagnose(MEMORISED, {"plan_xf": 5, "region_xf": 9}).suspect == ""


def test_falling_or_noisy_eval_loss_is_not_overfitting():
    falling = diagnose(_history([0.9, 0.6, 0.5, 0.45], [0.95, 0.70, 0.62, 0.60]))
    assert falling.verdict == "not overfitting"
    assert falling.describe() == ("not overfitting: eval loss lowest at the last evaluation, 0.6000 at step 400; "
                                  "train loss 0.4500")  # not the same step and loss twice over
    # One bump that comes back down: noise, not a sustained rise.
    assert diagnose(_history([0.9, 0.6, 0.5, 0.45, 0.4], [0.9, 0.7, 0.8, 0.69, 0.70])).verdict == "not overfitting"
    # Rising eval loss with train loss rising too: a learning-rate problem, not overfitting.
    assert diagnose(_history([0.5, 0.6, 0.7, 0.8], [0.5, 0.6, 0.7, 0.8])).verdict == "not overfitting"
    # A rise of under 10%: not yet; nor a tiny loss growing (penguins: 0.0074 -> 0.0109, accuracy 1.0 throughout).
    assert diagnose(_history([0.9, 0.6, 0.5, 0.4], [0.70, 0.72, 0.73, 0.74])).verdict == "not overfitting"
    assert diagnose(_history([0.01, 0.004, 0.002, 0.001], [0.0074, 0.008, 0.009, 0.0109])).verdict == "not overfitting"


def test_too_few_evaluations_are_not_measured():
    found = diagnose(MEMORISED[:2], SIZES)
    assert found.verdict == "not measured" and "raise trainer.train_steps" in found.describe()


def test_the_verdict_is_kept_in_the_trainer_record(tmp_path):
    record = Outcome(ExportChoice("best", 100, "auc", True, 0.7), None, 1.0, 2.0, diagnose(MEMORISED, SIZES))
    outcome.write(str(tmp_path), record)
    assert outcome.read(str(tmp_path)) == record
