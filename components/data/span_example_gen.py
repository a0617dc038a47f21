"""CsvExampleGen's executor for a snapshot in span layout: the same examples and splits, each span in its own files.
Why and sources: docs/internals.md."""

from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Any

import tfx
from tfx import types
from tfx.dsl.io import fileio
from tfx.types import standard_component_specs

from components.data import csv_examples
from components.data.snapshot import store
from components.errors import SpanLayoutError

SPAN_SHARDS = "span_shards"
FILE_SUFFIX = "-data_tfrecord"


def span_shards(examples: types.Artifact) -> list[dict]:
    """[{span, prefix, key}] of an Examples artifact this executor wrote, oldest span first; [] otherwise."""
    text = examples.get_string_custom_property(SPAN_SHARDS) if examples.has_custom_property(SPAN_SHARDS) else ""
    return json.loads(text) if text else []


def parser_version() -> list[str]:
    """The code that turns CSV into examples: TFX's reader, parser and type rule (its version) and
    components/data/csv_examples.py (its source's digest). Any edit of that module changes every span's key,
    so a cached analysis is never reused for rows the new code might make differently."""
    with open(csv_examples.__file__, "rb") as f:
        return [tfx.__version__, hashlib.sha256(f.read()).hexdigest()[:16]]


def _spans_of_snapshot(input_base: str, output_config_json: str) -> list[dict]:
    """The snapshot's spans with their content keys, from the manifest next to its data dir."""
    snapshot_uri = posixpath.dirname(input_base.rstrip("/"))
    manifest_path = posixpath.join(snapshot_uri, store.MANIFEST)
    if not fileio.exists(manifest_path):
        raise SpanLayoutError(f"{input_base} is not a snapshot's data dir: no {manifest_path}")
    with fileio.open(manifest_path) as f:
        manifest = store.Manifest.from_json(f.read(), snapshot_uri)
    if not manifest.spans:
        raise SpanLayoutError(f"snapshot {manifest.uri} is not in span layout (its manifest lists no spans)")
    result, parser = [], parser_version()
    for span in manifest.spans:
        files = [e for e in manifest.files if e.path.startswith(span + "/")]
        # What decides the rows of a split: the span's bytes, the hash split and the code that parses CSV.
        material = json.dumps([store.content_digest(files, manifest.missing_values),
                               json.loads(output_config_json), parser], sort_keys=True)
        result.append({"span": span, "prefix": span + FILE_SUFFIX,
                       "key": hashlib.sha256(material.encode()).hexdigest()[:32]})
    return result


class Executor(csv_examples.Executor):
    """The snapshot's spans as groups: `Split-<split>/<span>-data_tfrecord-*.gz`, named in `span_shards`."""

    def layout(self, input_base: str, paths: list[str], exec_properties: dict[str, Any]
               ) -> tuple[list[int], list[str]]:
        self._spans = _spans_of_snapshot(input_base, exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY])
        names = [s["span"] for s in self._spans]
        groups = []
        for path in paths:
            span = posixpath.relpath(path, input_base).split("/")[0]
            if span not in names:
                raise SpanLayoutError(f"{path} is in no span the snapshot's manifest lists ({', '.join(names)})")
            groups.append(names.index(span))
        return groups, [s["prefix"] for s in self._spans]

    def annotate(self, examples: types.Artifact) -> None:
        examples.set_string_custom_property(SPAN_SHARDS, json.dumps(self._spans))
