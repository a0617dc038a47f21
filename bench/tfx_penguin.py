"""TFX's own penguin example pipeline (from the installed tfx wheel), as the baseline.

Run as a script in its own process: `python -m bench.tfx_penguin <root> <data_root>`.
It is the shipped `create_pipeline` with its shipped Keras module and its
shipped DirectRunner Beam args; only tuning, bulk inference and example diff
are off, and the paths point into a temporary root.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd

from bench.side_by_side import CONFIG_FILE, example_paths
from pipeline.config import load_config

PIPELINE_NAME = "penguin_local_keras"
# The example's columns: the bill was called the culmen in the original data.
_RENAME = {"bill_length_mm": "culmen_length_mm", "bill_depth_mm": "culmen_depth_mm"}


def write_example_data(source_csv: str | os.PathLike, data_root: str | os.PathLike) -> Path:
    """The same rows in the example's format: four numeric features as floats and
    the species as an integer label (sorted names: Adelie 0, Chinstrap 1, Gentoo 2);
    rows missing any of them are dropped because its model has no imputation."""
    config = load_config(CONFIG_FILE)  # our penguins: its label and numeric columns are the example's features
    label, numeric = config.features.label, [f.name for f in config.features.numeric]
    df = pd.read_csv(source_csv, na_values=config.data.missing_values)
    wanted = [*numeric, label]
    if missing := [c for c in wanted if c not in df.columns]:
        raise ValueError(f"{source_csv}: missing columns {missing}")
    df = df[wanted].dropna()
    labels = {name: i for i, name in enumerate(sorted(df[label].unique()))}
    out = pd.DataFrame({label: df[label].map(labels)})
    for col in numeric:
        out[_RENAME.get(col, col)] = df[col].astype(float)
    path = Path(data_root) / "labelled" / "penguins.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False)
    return path


def run(root: str, data_root: str) -> None:
    from tfx import v1 as tfx
    from tfx.examples.penguin import penguin_pipeline_local as example
    from tfx.examples.penguin import penguin_utils_keras

    p = example_paths(root, PIPELINE_NAME)
    pipeline = example.create_pipeline(
        pipeline_name=PIPELINE_NAME,
        pipeline_root=p["pipeline_root"],
        data_root=data_root,
        module_file=penguin_utils_keras.__file__.replace(".pyc", ".py"),
        accuracy_threshold=0.6,  # the example's own value
        serving_model_dir=p["serving_model_dir"],
        metadata_path=p["metadata_path"],
        user_provided_schema_path=None,
        enable_tuning=False,
        enable_bulk_inferrer=False,
        enable_example_diff=False,
        examplegen_input_config=None,
        examplegen_range_config_date=None,
        resolver_range_config=None,
        beam_pipeline_args=example._beam_pipeline_args_by_runner["DirectRunner"],
        enable_transform_input_cache=True)
    tfx.orchestration.LocalDagRunner().run(pipeline)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m bench.tfx_penguin <root> <data_root>")
    run(sys.argv[1], sys.argv[2])
