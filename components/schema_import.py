"""ImportSchemaGen whose cache key follows the schema file's contents, not only its path.

TFX's cache key for a component execution is made of its executor, its input
artifacts, its execution properties and its output spec
(tfx/orchestration/portable/cache_utils.py, get_cache_context). TFX's
ImportSchemaGen has no input artifact and one property, the schema file's
path: after a person edits the curated schema in place, a run with caching on
is served the old Schema artifact, and Transform and the Trainer quietly keep
the old schema. Here a local file's sha256 is a second execution property, so
an edited schema is a new execution; the executor is TFX's and ignores it.

A schema in a bucket (gs://) is not read when the pipeline is built: compiling
for Vertex needs no cloud access. Its digest is left empty, and Vertex never
caches this task (pipeline/spec/cache_rule.py), so an edit there is seen too.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tfx import types
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.dsl.components.base import base_component
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter

SCHEMA_DIGEST_KEY = "schema_sha256"


class _Spec(standard_component_specs.ImportSchemaGenSpec):
    PARAMETERS = {**standard_component_specs.ImportSchemaGenSpec.PARAMETERS,
                  SCHEMA_DIGEST_KEY: ExecutionParameter(type=str)}


class SchemaImport(ImportSchemaGen):
    """TFX's ImportSchemaGen (same executor and output) with the schema's digest in its properties."""

    SPEC_CLASS = _Spec

    def __init__(self, schema_file: str):
        digest = ""
        if "://" not in schema_file:
            if not os.path.isfile(schema_file):
                raise FileNotFoundError(f"data.schema_file: no schema at {schema_file}")
            digest = hashlib.sha256(Path(schema_file).read_bytes()).hexdigest()
        spec = _Spec(schema_file=schema_file, **{SCHEMA_DIGEST_KEY: digest},
                     schema=types.Channel(type=standard_artifacts.Schema))
        base_component.BaseComponent.__init__(self, spec=spec)
