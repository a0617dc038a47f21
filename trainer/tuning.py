"""The `tuning` section: which trainer keys a search varies and over what, and a trial's values as a trainer config.
Plain Python (no TensorFlow, no KerasTuner); docs/tuning.md."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, Mapping, Optional, Union

from pydantic import Field, ValidationError, field_validator, model_validator

from trainer import budget
from trainer.config import Section, TrainerConfig
from trainer.errors import TrainerError

# The trainer keys a search may vary, by how their values are searched: a number range or a choice ("float",
# "int"), or only a choice of layer-width lists ("units"). The rest decide where and how training runs, not
# which model it finds (strategy, precision, checkpoints), or the run's budget per step (steps_per_execution).
TUNABLE = {"learning_rate": "float", "dropout": "float", "l2": "float", "warmup_steps": "int",
           "global_batch_size": "int", "train_steps": "int", "hidden_units": "units"}


class Range(Section):
    """Every value from `min` to `max` (both included); `log` samples the exponent evenly (min > 0)."""
    min: float
    max: float
    scale: Literal["linear", "log"] = "linear"
    step: Optional[int] = Field(None, ge=1)  # integer keys only: min, min + step, ... up to max


class Choice(Section):
    """One of `values`."""
    values: list[Union[float, list[int]]] = Field(min_length=1)


# What `tuning: {trials: N}` searches (docs/tuning.md): the learning rate over three decades, four MLP shapes
# and dropout. The shipped configs' own values lie inside, so trial 1 (their values) is one of the points.
DEFAULT_SPACE: dict[str, dict] = {
    "learning_rate": {"min": 1e-4, "max": 1e-1, "scale": "log"},
    "hidden_units": {"values": [[16, 16], [32, 16], [64, 32], [128, 64]]},
    "dropout": {"min": 0.0, "max": 0.5},
}


class TuningConfig(Section):
    """The search: `trials` trainings of the trainer with the values of `space`, the best by the task's main metric
    on the eval split (components/tuner/)."""
    trials: int = Field(ge=1, le=1000)
    # Trials at once on Vertex (HyperparameterTuningJob.parallel_trial_count); locally they run one after
    # another: one trial's strategy already holds this machine's devices.
    parallel_trials: int = Field(1, ge=1)
    # random: KerasTuner's RandomSearch locally, RANDOM_SEARCH on Vertex; bayesian: KerasTuner's
    # BayesianOptimization locally, Vertex's default algorithm (Bayesian optimization) on Vertex.
    algorithm: Literal["random", "bayesian"] = "random"
    # trainer key -> a Range or a Choice; empty: DEFAULT_SPACE.
    space: Optional[dict[str, Union[Range, Choice]]] = None
    # latest: no search; the Trainer takes the last search's best values on this root (docs/tuning.md).
    reuse: Optional[Literal["latest"]] = None
    # The search fails once this many trials failed (HyperparameterTuningJob.max_failed_trial_count on Vertex).
    max_failed_trials: int = Field(3, ge=1)

    @field_validator("space", mode="before")
    @classmethod
    def _space(cls, v: Any) -> Any:
        if v is None:
            return None
        if not isinstance(v, Mapping) or not v:
            raise ValueError("must map trainer keys to {min, max} or {values: [...]}; leave it out for the "
                             "default space (docs/tuning.md)")
        unknown = sorted(set(v) - set(TUNABLE))
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a tunable trainer key; tunable: {', '.join(TUNABLE)}")
        return {key: _entry(key, spec) for key, spec in v.items()}

    @model_validator(mode="after")
    def _ranges(self) -> "TuningConfig":
        if self.parallel_trials > self.trials:
            raise ValueError(f"parallel_trials ({self.parallel_trials}) exceeds trials ({self.trials})")
        for key, spec in self.search_space.items():
            problem = _problem(key, spec)
            if problem:
                raise ValueError(f"space.{key}: {problem}")
        return self

    @property
    def search_space(self) -> dict[str, Union[Range, Choice]]:
        if self.space is not None:
            return dict(self.space)
        return {k: (Choice if "values" in v else Range).model_validate(v) for k, v in DEFAULT_SPACE.items()}


def _entry(key: str, spec: Any) -> Union[Range, Choice]:
    """A space entry as a Range ({min, max, ...}) or a Choice ({values}), its errors naming the key."""
    if isinstance(spec, (Range, Choice)):
        return spec
    kind = Choice if isinstance(spec, Mapping) and "values" in spec else Range
    try:
        return kind.model_validate(spec)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ValueError(f"{key}{'.' + where if where else ''}: {first['msg']} (a range is {{min, max, scale, "
                         "step}, a choice {values: [...]})") from None


def _problem(key: str, spec: Union[Range, Choice]) -> Optional[str]:
    """Why `spec` is no search over trainer key `key` (an empty range, a value the trainer refuses), or None."""
    kind = TUNABLE[key]
    if isinstance(spec, Range):
        if kind == "units":
            return "hidden_units takes {values: [[64, 32], ...]}: a choice of layer-width lists, not a range"
        if not spec.min < spec.max:
            return (f"empty range: min {spec.min} must be below max {spec.max} (for one value, set "
                    f"trainer.{key} instead)")
        if spec.scale == "log" and spec.min <= 0:
            return f"scale log needs min > 0 (got {spec.min})"
        if kind == "int" and not (float(spec.min).is_integer() and float(spec.max).is_integer()):
            return f"trainer.{key} is an integer: min and max must be integers"
        if spec.step is not None and kind != "int":
            return f"step is for integer keys; trainer.{key} is a number"
        if spec.step is not None and spec.min + spec.step > spec.max:
            return f"empty range: min {spec.min} + step {spec.step} is above max {spec.max}"
        points = (spec.min, spec.max)
    else:
        wrong = [v for v in spec.values if isinstance(v, list) != (kind == "units")]
        if wrong:
            return (f"{wrong[0]!r}: trainer.{key} takes " + ("layer-width lists such as [64, 32]" if kind == "units"
                                                           else "numbers"))
        if kind == "int" and any(not float(v).is_integer() for v in spec.values):
            return f"trainer.{key} is an integer: every value must be one"
        if len({encode(key, v) for v in spec.values}) != len(spec.values):
            return "the values repeat"
        points = tuple(spec.values)
    for value in points:
        try:
            TrainerConfig.model_validate({key: decode(key, value)})
        except ValidationError as e:
            return f"{value!r} is not a valid trainer.{key}: {e.errors()[0]['msg']}"
    return None


# The search value of hidden_units left empty: the widths sized from the data at training time (trainer/sizing.py).
SIZED = "sized"


def encode(key: str, value: Any) -> Union[str, float, int]:
    """A trainer value as a search value: a layer list as "64,32" (KerasTuner's Choice and Vertex's CATEGORICAL
    take no lists), hidden_units left empty as SIZED, an integer key as an int."""
    kind = TUNABLE[key]
    if kind == "units":
        return SIZED if value is None else ",".join(str(int(u)) for u in value)
    return int(value) if kind == "int" else float(value)


def decode(key: str, value: Any) -> Any:
    """A search value (KerasTuner's, or Vertex's command-line text) as the trainer value."""
    kind = TUNABLE[key]
    if kind == "units":
        if value == SIZED:
            return None
        return [int(u) for u in str(value).split(",")] if isinstance(value, str) else [int(u) for u in value]
    number = float(value)
    if kind == "int":
        if not number.is_integer():
            raise TrainerError(f"tuning: trainer.{key} is an integer, got {value!r}")
        return int(number)
    return number


def apply(cfg: TrainerConfig, values: Mapping[str, Any]) -> TrainerConfig:
    """The trainer config a trial (or the tuned Trainer) trains with: `cfg` with `values` (search values) set."""
    unknown = sorted(set(values) - set(TUNABLE))
    if unknown:
        raise TrainerError(f"tuning: hyperparameter {unknown[0]!r} is no tunable trainer key (tunable: "
                           f"{', '.join(TUNABLE)}); was it tuned by another version of this code?")
    try:
        return TrainerConfig.model_validate({**cfg.model_dump(), **{k: decode(k, v) for k, v in values.items()}})
    except ValidationError as e:
        raise TrainerError(f"tuning: the values {dict(values)} make no valid trainer config: {e}") from None


def configured_point(cfg: TrainerConfig, space: Mapping[str, Union[Range, Choice]]) -> dict[str, Any]:
    """The search values of the trainer section's own settings, for the keys where they lie in `space`: the
    first trial locally, so the search returns the configured model unless a trial does better."""
    point = {}
    for key, spec in space.items():
        own = getattr(cfg, key)
        if own is None and TUNABLE[key] != "units":
            own = budget.unplanned_default(key)
            if own is None:  # planned from the data in every trial alike
                continue
        value = encode(key, own)
        if isinstance(spec, Choice):
            # Widths left empty are the sized model: a choice the local search adds (components/tuner/space.py).
            if value in [encode(key, v) for v in spec.values] or value == SIZED:
                point[key] = value
        elif spec.min <= value <= spec.max and (spec.step is None or (value - spec.min) % spec.step == 0):
            point[key] = value
    return point


@dataclasses.dataclass(frozen=True)
class Objective:
    """What a search maximizes or minimizes: the task's main metric on the eval split (trainer/tasks.py)."""
    metric: str  # its label, e.g. auc: the metric id a Vertex trial reports
    higher_is_better: bool

    def better(self, a: Optional[float], b: Optional[float]) -> bool:
        """Whether `a` beats `b` (None and NaN lose)."""
        if a is None or math.isnan(a):
            return False
        if b is None or math.isnan(b):
            return True
        return a > b if self.higher_is_better else a < b
