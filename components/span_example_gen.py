"""CsvExampleGen's executor for a snapshot in span layout: the same examples and splits, each span in its own files.

The pipeline runs it on the snapshot artifact through components/example_gen.py (SpanSnapshotExampleGen).

TFX's CsvExampleGen reads a snapshot's span directories as one input, and
once the rows are in its output nobody can tell which span a row came from.
Transform's analyzer cache needs exactly that (components/transform.py): it
keeps one entry per dataset, so a run re-analyzes only the spans it has not
seen if each span's rows of a split can be read on their own. This executor
parses the CSV as TFX's does (its own DoFns, column types inferred over the
whole window), splits every row by the same hash, and writes each split's rows
of span S to `Split-<split>/S-data_tfrecord-*.gz`. Everything that reads
`Split-<split>/*` reads the same rows as before.

The output artifact names its spans in the `span_shards` property: per span,
the file prefix and a key for the rows' content (the span's files in the
snapshot manifest, the split config and this code's TFX version).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Any, Iterable

import apache_beam as beam
import tfx
from tfx import types
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor, _PartitionFn
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, proto_utils
from tfx_bsl.coders import csv_decoder

from components.snapshot import store

SPAN_SHARDS = "span_shards"
FILE_SUFFIX = "-data_tfrecord"


class SpanLayoutError(ValueError):
    """The input is not a snapshot in span layout; the message names the path."""


def span_shards(examples: types.Artifact) -> list[dict]:
    """[{span, prefix, key}] of an Examples artifact this executor wrote, oldest span first; [] otherwise."""
    text = examples.get_string_custom_property(SPAN_SHARDS) if examples.has_custom_property(SPAN_SHARDS) else ""
    return json.loads(text) if text else []


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
    result = []
    for span in manifest.spans:
        files = [e for e in manifest.files if e.path.startswith(span + "/")]
        # What decides the rows of a split: the span's bytes, the hash split and how TFX parses CSV.
        material = json.dumps([store.content_digest(files, manifest.missing_values),
                               json.loads(output_config_json), tfx.__version__], sort_keys=True)
        result.append({"span": span, "prefix": span + FILE_SUFFIX,
                       "key": hashlib.sha256(material.encode()).hexdigest()[:32]})
    return result


class _ReadTaggedCsvRecords(beam.DoFn):
    """TFX's CSV reader (multi-line quoted cells, header skipped), with each record's span."""

    def setup(self):
        self._read = csv_executor._ReadCsvRecordsFromTextFile()  # noqa: SLF001 - reused, not copied

    def process(self, item: tuple[int, str]) -> Iterable[tuple[int, str]]:
        span, path = item
        for record in self._read.process(path):
            yield span, record


class _ParseTagged(beam.DoFn):
    def setup(self):
        self._parse = csv_decoder.ParseCSVLine(delimiter=",")
        self._parse.setup()

    def process(self, item: tuple[int, str]) -> Iterable[tuple[int, list]]:
        span, record = item
        for cells, _ in self._parse.process(record):
            yield span, cells


class _TaggedToExample(beam.DoFn):
    """TFX's CSV-cells-to-tf.Example conversion, with each example's span."""

    def setup(self):
        self._convert = csv_executor._ParsedCsvToTfExample()  # noqa: SLF001 - reused, not copied

    def process(self, item: tuple[int, list], column_infos) -> Iterable[tuple[int, Any]]:
        span, cells = item
        for example in self._convert.process(cells, column_infos):
            yield span, example


class Executor(BaseExampleGenExecutor):
    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
        return csv_executor._CsvToExample  # noqa: SLF001 - only for TFX's own callers; Do below doesn't use it

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input())
        output_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output())
        if len(input_config.splits) != 1 or not output_config.split_config.splits:
            raise SpanLayoutError("the span ExampleGen takes one input split and hash-splits it "
                                  f"(got input {input_config}, output {output_config})")
        spans = _spans_of_snapshot(input_base, exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY])
        column_names, files = _files_by_span(input_base, input_config.splits[0].pattern, [s["span"] for s in spans])
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        examples = artifact_utils.get_single_instance(output_dict[standard_component_specs.EXAMPLES_KEY])
        examples.split_names = artifact_utils.encode_split_names(split_names)

        buckets = []
        for split in output_config.split_config.splits:
            buckets.append((buckets[-1] if buckets else 0) + split.hash_buckets)

        def output_index(item: tuple[int, Any]) -> tuple[int, bytes]:
            # The split by TFX's own hash of the example (as CsvExampleGen splits it), then the span.
            span, example = item
            split = _PartitionFn(example, len(buckets), buckets, output_config.split_config)
            return split * len(spans) + span, example.SerializeToString()

        with self._make_beam_pipeline() as pipeline:
            # One shuffle for all outputs (TFX's WriteSplit shuffles each split before writing it).
            parts = (_tagged_examples(pipeline, column_names, files)
                     | "SplitAndSpan" >> beam.Map(output_index)
                     | "Shuffle" >> beam.transforms.Reshuffle()
                     | "Partition" >> beam.Partition(lambda item, n: item[0], len(split_names) * len(spans)))
            for i, (split, span) in enumerate((sp, sn) for sp in split_names for sn in spans):
                prefix = posixpath.join(artifact_utils.get_split_uri([examples], split), span["prefix"])
                _ = (parts[i] | f"Untag[{split}][{span['span']}]" >> beam.Values()
                     | f"Write[{split}][{span['span']}]" >> beam.io.WriteToTFRecord(prefix, file_name_suffix=".gz"))

        examples_utils.set_payload_format(examples, example_gen_pb2.FORMAT_TF_EXAMPLE)
        examples_utils.set_file_format(examples, write_split.to_file_format_str(example_gen_pb2.FORMAT_TFRECORDS_GZIP))
        examples.set_string_custom_property(SPAN_SHARDS, json.dumps(spans))


def _files_by_span(input_base: str, pattern: str, spans: list[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """The CSV header all files share, and (span index, path) per file."""
    found = sorted(fileio.glob(posixpath.join(input_base, pattern)))
    if not found:
        raise SpanLayoutError(f"split pattern {pattern} matches no files under {input_base}")
    header = io_utils.load_csv_column_names(found[0])
    result = []
    for path in found:
        span = posixpath.relpath(path, input_base).split("/")[0]
        if span not in spans:
            raise SpanLayoutError(f"{path} is in no span the snapshot's manifest lists ({', '.join(spans)})")
        if io_utils.load_csv_column_names(path) != header:
            raise SpanLayoutError(f"{path} has a different header from {found[0]}")
        result.append((spans.index(span), path))
    return header, result


def _tagged_examples(pipeline: beam.Pipeline, column_names: list[str], files: list[tuple[int, str]]
                     ) -> beam.PCollection:
    """(span index, tf.Example) for every CSV record, parsed and typed as TFX's CsvExampleGen does."""
    cells = (pipeline
             | "CreateFilenames" >> beam.Create(files)
             | "ReadFromText" >> beam.ParDo(_ReadTaggedCsvRecords())
             | "ParseCSVLine" >> beam.ParDo(_ParseTagged()))
    # Over the whole window, as TFX does: a span's column types don't depend on the spans it is read with.
    column_infos = beam.pvalue.AsSingleton(
        cells | beam.Values() | "InferColumnTypes" >> beam.CombineGlobally(
            csv_decoder.ColumnTypeInferrer(column_names, skip_blank_lines=True)))
    return cells | "ToTFExample" >> beam.ParDo(_TaggedToExample(), column_infos)
