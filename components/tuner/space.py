"""The tuning section as the two searchers take it: KerasTuner's HyperParameters and Vertex's StudySpec parameters;
and the objective from the task. (docs/tuning.md)"""

from __future__ import annotations

from typing import Any, Mapping, Union

import keras_tuner

from components.tuner import TUNING_KEY
from trainer import features, tuning
from trainer.config import TrainerConfig
from trainer.run_fn import CONFIG_KEY
from trainer.tasks import MAIN_METRICS
from trainer.tuning import Choice, Objective, Range, TuningConfig

# DISCRETE values: "at least 1e-10 apart", "not more than 1,000 values" (aiplatform_v1 study.proto,
# StudySpec.ParameterSpec.DiscreteValueSpec).
MAX_DISCRETE_VALUES = 1000


def objective(custom_config: Mapping[str, Any]) -> Objective:
    """The task's main metric on the eval split, with its direction (trainer/tasks.py MAIN_METRICS)."""
    main = MAIN_METRICS[features.from_custom_config(custom_config).task]
    return Objective(main.label, main.higher_is_better)


def section(custom_config: Mapping[str, Any]) -> tuple[TuningConfig, TrainerConfig]:
    return (TuningConfig.model_validate(custom_config[TUNING_KEY]),
            TrainerConfig.model_validate(custom_config[CONFIG_KEY]))


def hyperparameters(space: Mapping[str, Union[Range, Choice]], cfg: TrainerConfig) -> keras_tuner.HyperParameters:
    """The space as KerasTuner's HyperParameters, each default the trainer's own value where it lies in the space
    (the search's first trial, components/tuner/search.py)."""
    own = tuning.configured_point(cfg, space)
    hp = keras_tuner.HyperParameters()
    for key, spec in space.items():
        default = own.get(key)
        if isinstance(spec, Choice):
            values = [tuning.encode(key, v) for v in spec.values]
            # hidden_units left empty: the model sized from the data is one of the choices, and the first trial's.
            hp.Choice(key, [tuning.SIZED, *values] if default == tuning.SIZED else values, default=default)
        elif tuning.TUNABLE[key] == "int":
            hp.Int(key, int(spec.min), int(spec.max), step=spec.step, sampling=spec.scale, default=default)
        else:
            hp.Float(key, spec.min, spec.max, sampling=spec.scale, default=default)
    return hp


def best_config(space: Mapping[str, Union[Range, Choice]], cfg: TrainerConfig, values: Mapping[str, Any]) -> dict:
    """KerasTuner's HyperParameters config ({"space", "values"}) with `values`: what TFX's Tuner writes as
    best_hyperparameters.txt and the Trainer reads (run_fn.trainer_config)."""
    hp = hyperparameters(space, cfg)
    for key, value in values.items():
        hp.values[key] = tuning.encode(key, tuning.decode(key, value))
    return hp.get_config()


def parameter_specs(space: Mapping[str, Union[Range, Choice]]) -> list[dict[str, Any]]:
    """StudySpec.ParameterSpec for each key, in the proto's field names (aiplatform_v1 study.proto): a number
    range as DOUBLE or INTEGER (scaled), an integer range with a step and a number choice as DISCRETE (values
    ascending), a layer-width choice as CATEGORICAL ("64,32"; scale_type left unset, as the proto asks)."""
    specs = []
    for key, spec in space.items():
        parameter: dict[str, Any] = {"parameter_id": key}
        if isinstance(spec, Range) and spec.step is None:
            bounds = {"min_value": spec.min, "max_value": spec.max}
            if tuning.TUNABLE[key] == "int":
                parameter["integer_value_spec"] = {k: int(v) for k, v in bounds.items()}
            else:
                parameter["double_value_spec"] = bounds
            parameter["scale_type"] = "UNIT_LOG_SCALE" if spec.scale == "log" else "UNIT_LINEAR_SCALE"
        elif isinstance(spec, Range) or tuning.TUNABLE[key] != "units":
            values = (list(range(int(spec.min), int(spec.max) + 1, spec.step)) if isinstance(spec, Range)
                      else sorted(float(v) for v in spec.values))
            if len(values) > MAX_DISCRETE_VALUES:
                raise ValueError(f"tuning.space.{key}: {len(values)} values; Vertex takes at most "
                                 f"{MAX_DISCRETE_VALUES} discrete values")
            parameter["discrete_value_spec"] = {"values": [float(v) for v in values]}
            parameter["scale_type"] = "UNIT_LOG_SCALE" if getattr(spec, "scale", "") == "log" \
                else "UNIT_LINEAR_SCALE"
        else:
            parameter["categorical_value_spec"] = {"values": [tuning.encode(key, v) for v in spec.values]}
        specs.append(parameter)
    return specs
