"""`python -m components.tuner.trial`: one trial of a Vertex HyperparameterTuningJob: the Trainer's training with the
values Vertex passes as --<parameter_id>=<value>, its objective reported through cloudml-hypertune."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from typing import Any

from tfx.components.trainer import fn_args_utils
from tfx.types import artifact_utils

from components.tuner import space
from trainer.errors import PreemptedError, ProjectError
from trainer.run_fn import trainer_config
from trainer.trial import run_trial

log = logging.getLogger(__name__)
EXIT_BAD_VALUES, EXIT_PREEMPTED = 2, 75  # as python -m trainer (trainer/cli.py)


def parse_values(args: list[str], keys: set[str]) -> dict[str, Any]:
    """{parameter_id: value} from Vertex's arguments, `--id=value` or `--id value`; each must be a searched key."""
    values, i = {}, 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ValueError(f"trial argument {arg!r}: expected --<parameter_id>=<value>")
        key, sep, value = arg[2:].partition("=")
        if not sep:
            if i + 1 >= len(args):
                raise ValueError(f"trial argument {arg!r} has no value")
            value, i = args[i + 1], i + 1
        if key not in keys:
            raise ValueError(f"trial argument --{key}: not a searched key ({', '.join(sorted(keys))})")
        values[key] = value
        i += 1
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.tuner.trial", description=__doc__)
    parser.add_argument("--inputs", required=True,
                        help="the Tuner's input artifacts, as TFX's Vertex client writes them")
    parser.add_argument("--exec-properties", required=True, help="the Tuner's execution properties (JSON)")
    args, hyperparameters = parser.parse_known_args(argv)
    exec_properties = json.loads(args.exec_properties)
    custom = json.loads(exec_properties.get("custom_config") or "{}")
    tuning_cfg, _ = space.section(custom)
    try:
        values = parse_values(hyperparameters, set(tuning_cfg.search_space))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_VALUES
    working_dir = tempfile.mkdtemp(prefix="trial-")
    fn_args = fn_args_utils.get_common_fn_args(artifact_utils.parse_artifact_dict(args.inputs), exec_properties,
                                               working_dir)
    try:
        result = run_trial(fn_args, trainer_config(fn_args), values, working_dir)
    except PreemptedError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_PREEMPTED
    except ProjectError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    import hypertune  # cloudml-hypertune: writes $CLOUD_ML_HP_METRIC_FILE, default /tmp/hypertune/output.metrics

    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag=result.metric, metric_value=result.objective, global_step=result.step)
    log.info("reported eval %s %.4f (step %d) to Vertex", result.metric, result.objective, result.step)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
