"""ImportSchemaGen whose cache key follows the schema file's contents, not only its path.
Why and sources: docs/internals.md."""

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
