"""`python -m pipeline schema infer`: a schema inferred with TFDV from the data as a run would snapshot it,
written for review (the start of a curated schema). (docs/internals.md)"""

from __future__ import annotations

import os
from typing import Optional

from components.data.snapshot import store
from pipeline.config import Config, resolve
from pipeline.data.checks import columns_from_schema
from pipeline.errors import CommandFailed, ConfigError
from trainer.errors import FeatureConfigError
from trainer.feature_config import ResolvedFeatures
from trainer.feature_config import resolve as resolve_features


def infer_schema(config: Config, output: str, force: bool = False) -> tuple[str, Optional[ResolvedFeatures]]:
    """Write TFDV's schema of the data as the pipeline will read it; returns the path and,
    when the config has a features section, the features resolved against it."""
    import tensorflow_data_validation as tfdv
    from apache_beam.options.pipeline_options import PipelineOptions

    if os.path.exists(output) and not force:
        raise CommandFailed(f"{output} exists; review and edit it, or pass --force to overwrite it")
    manifest = store.create(resolve(config.data.input_dir), config.snapshots_root,
                                missing_values=config.data.missing_values)
    stats = tfdv.generate_statistics_from_csv(f"{manifest.data_uri}/*",
                                              pipeline_options=PipelineOptions(config.beam.args))
    schema = tfdv.infer_schema(stats, infer_feature_shape=True)
    for feature in schema.feature:
        # CsvExampleGen writes an empty cell as a feature with no values, where TFDV's CSV
        # reader saw no feature: without this every optional column is an anomaly in a run.
        feature.value_count.ClearField("min")
        if config.features is not None and feature.name == config.features.label:
            # Every training row needs its label: make a row without one an anomaly.
            feature.presence.min_fraction = 1.0
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    tfdv.write_schema_text(schema, output)
    if config.features is None:
        return output, None
    try:
        return output, resolve_features(config.features, columns_from_schema(schema))
    except FeatureConfigError as e:
        raise ConfigError(f"{e}\n(the inferred schema is in {output})") from None
