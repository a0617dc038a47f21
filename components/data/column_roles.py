"""Transform's first step: the column roles inferred from a sample of the training split, put in its custom_config
for the preprocessing_fn, printed, and kept beside the transform graph for the Trainer, the report and lineage."""

from __future__ import annotations

import logging
import math
import os
from typing import Any, Optional

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import types
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, json_utils

from trainer import role_table
from trainer import roles as data_roles
from trainer.data import record_counts
from trainer.feature_config import ResolvedFeatures, columns_from_schema, resolve
from trainer.features import CONFIG_KEY as FEATURES_KEY
from trainer.features import from_custom_config, layout_from_schema, xf

_DTYPES = {"int": tf.int64, "float": tf.float32, "string": tf.string}

log = logging.getLogger(__name__)


def sample(examples: types.Artifact, kinds: dict[str, str], split: str = "train",
           rows: int = data_roles.SAMPLE_ROWS) -> list[data_roles.Sample]:
    """The present values of each column (`kinds`: the schema's names and types) in up to `rows` examples spread
    evenly over the split (every n-th), with the row of each, from the gzipped TFRecords ExampleGen writes."""
    splits = artifact_utils.decode_split_names(examples.split_names)
    split_uri = artifact_utils.get_split_uri([examples], split if split in splits else splits[0])
    files = sorted(fileio.glob(os.path.join(split_uri, "*")))
    spec = {name: tf.io.VarLenFeature(_DTYPES[kind]) for name, kind in kinds.items()}
    values: dict[str, list] = {name: [] for name in kinds}
    index: dict[str, list] = {name: [] for name in kinds}
    count = 0
    # ExampleGen keeps the input's order, so the first rows of a table sorted by date would be its first months
    # (the bench's 295k-row flights CSV: its first 20,000 rows are all January): every n-th record instead, after
    # one count of them.
    every = max(1, math.ceil(sum(record_counts(files)) / rows))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").shard(every, 0)
    # Parsed in batches by TF's own parser: a Python loop over the protos costs seconds on 10,000 rows.
    for batch in records.take(rows).batch(4096):
        for name, parsed in tf.io.parse_example(batch, spec).items():
            cells = parsed.values.numpy().tolist()
            values[name].extend(c.decode("utf-8", "replace") for c in cells) if kinds[name] == "string" \
                else values[name].extend(cells)
            index[name].extend((parsed.indices[:, 0].numpy() + count).tolist())
        count += int(batch.shape[0])
    return [data_roles.Sample(name, kinds[name], values[name], count, index[name]) for name in sorted(kinds)]


def schema_kinds(input_dict: dict[str, list[types.Artifact]]) -> dict[str, str]:
    schema_uri = artifact_utils.get_single_uri(input_dict["schema"])
    schema = io_utils.parse_pbtxt_file(io_utils.get_only_uri_in_dir(schema_uri), schema_pb2.Schema())
    return columns_from_schema(schema)


def infer(input_dict: dict[str, list[types.Artifact]], custom_config: Optional[dict]
          ) -> Optional[tuple[dict[str, data_roles.Role], list[dict[str, str]], ResolvedFeatures]]:
    """The roles of the training split's columns, the table of how the features section reads them, and the
    section resolved; None without a features section (a custom preprocessing_fn's own custom_config)."""
    if not custom_config or FEATURES_KEY not in custom_config:
        return None
    kinds = schema_kinds(input_dict)
    examples = artifact_utils.get_single_instance(input_dict["examples"])
    config = from_custom_config(custom_config)
    inferred = data_roles.infer(sample(examples, kinds), config.label, config.task, config.positive_class)
    resolved = resolve(config, kinds, inferred)
    table = role_table.rows(resolved)
    log.info("columns, as this run reads them (roles inferred from up to %s training rows spread over the split; "
             "the features section overrides them):\n%s", f"{data_roles.SAMPLE_ROWS:,}", role_table.format_table(table))
    return inferred, table, resolved


def keep(transform_graph: types.Artifact, inferred: dict[str, data_roles.Role], table: list[dict[str, str]],
         resolved: ResolvedFeatures) -> None:
    """Beside the graph: the roles for the Trainer (trainer/roles.py reads them), the table for report and lineage,
    with each category's id count as the analysis found it (vocabulary and OOV buckets) and how the model reads
    it (one-hot, or an embedding sized by it: trainer/features.py)."""
    import tensorflow_transform as tft

    with fileio.open(os.path.join(transform_graph.uri, data_roles.ROLES_FILE), "w") as f:
        f.write(data_roles.dumps(inferred))
    schema = tft.TFTransformOutput(transform_graph.uri).transformed_metadata.schema
    inputs = {c.name: c for c in layout_from_schema(schema, resolved).categorical}
    table = role_table.with_sizes(table, {r["column"]: inputs[xf(r["column"])] for r in table
                                          if xf(r["column"]) in inputs})
    transform_graph.set_string_custom_property(role_table.ARTIFACT_PROPERTY, role_table.dumps(table))


def with_roles(exec_properties: dict[str, Any], key: str, custom_config: dict,
               inferred: dict[str, data_roles.Role]) -> dict[str, Any]:
    """Transform's execution properties with the roles in its custom_config, where the preprocessing_fn reads them."""
    config = {**custom_config, data_roles.CONFIG_KEY: data_roles.dumps(inferred)}
    return {**exec_properties, key: json_utils.dumps(config)}
