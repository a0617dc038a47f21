"""TFX's own Chicago taxi pipeline (from the installed tfx wheel), as the baseline for configs/taxi.yaml.

Run as a script in its own process: `python -m bench.tfx_taxi <root> <data_root>`.
It is the shipped `_create_pipeline` of taxi_pipeline_native_keras.py with its
shipped module file (taxi_utils_native_keras.py: Transform's preprocessing_fn
and a wide-and-deep model.fit for 1000 steps), its shipped Beam args, run by
the BeamDagRunner its `__main__` uses. Only the paths point into a temporary
root, and the data root is ours (data/taxi: the wheel's big_tipper_label CSV,
whose extra big_tipper column the module ignores: it computes the same label,
tips > 20% of the fare, from tips and fare).
"""

from __future__ import annotations

import sys

from bench.side_by_side import example_paths

PIPELINE_NAME = "chicago_taxi_native_keras"
# Their serving signature's output: the probability of a big tip.
OUTPUT_KEY = "outputs"


def run(root: str, data_root: str) -> None:
    from tfx.examples.chicago_taxi_pipeline import taxi_pipeline_native_keras as example
    from tfx.examples.chicago_taxi_pipeline import taxi_utils_native_keras
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    p = example_paths(root, PIPELINE_NAME)
    BeamDagRunner().run(example._create_pipeline(
        pipeline_name=PIPELINE_NAME,
        pipeline_root=p["pipeline_root"],
        data_root=data_root,
        module_file=taxi_utils_native_keras.__file__.replace(".pyc", ".py"),
        serving_model_dir=p["serving_model_dir"],
        metadata_path=p["metadata_path"],
        beam_pipeline_args=example._beam_pipeline_args))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m bench.tfx_taxi <root> <data_root>")
    run(sys.argv[1], sys.argv[2])
