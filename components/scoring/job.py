"""The Beam job: files -> chunks of encoded rows -> RunInference(serving_default) -> part files, then one
output file per input file (its rows in order) and one rejects file; counts from Beam's metrics."""

from __future__ import annotations

import dataclasses
import posixpath
import time
import uuid
from typing import Callable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.ml.inference.base import PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from components.scoring import output
from components.scoring.columns import Columns
from components.scoring.model import ServingDefaultHandler
from components.scoring.rows import Chunk, read_chunks

NAMESPACE = "predict"
CHUNK_ROWS = 4096
PARTS_PREFIX = ".parts-"
SUMMARY_FILE = "summary.json"  # beside the predictions: Counts.as_dict and what the caller adds


@dataclasses.dataclass(frozen=True)
class InputFile:
    path: str
    header: tuple[str, ...]
    output_name: str  # relative to the output directory, without the format's extension


@dataclasses.dataclass(frozen=True)
class Counts:
    rows: int
    scored: int
    rejected: int
    seconds: float
    outputs: tuple[str, ...]
    rejects: str

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict:
        """What a scoring run's SUMMARY_FILE says of its rows."""
        return {"rows": self.rows, "scored": self.scored, "rejected": self.rejected, "seconds": round(self.seconds, 3),
                "outputs": list(self.outputs), "rejects": self.rejects}


class _ReadFile(beam.DoFn):
    def __init__(self, columns: Columns, chunk_rows: int):
        self._columns, self._chunk_rows = columns, chunk_rows

    def setup(self):
        from tfx_bsl.coders import example_coder

        self._encoder = example_coder.RecordBatchToExamplesEncoder()

    def process(self, item: tuple[int, InputFile]) -> Iterator[Chunk]:
        index, file = item
        yield from read_chunks(file.path, index, file.header, self._columns, self._chunk_rows, self._encoder)


class _WriteChunk(beam.DoFn):
    """A scored chunk's lines and its rejects to their part files, counted."""

    def __init__(self, parts: str, layout: output.Layout, paths: Sequence[str]):
        self._parts, self._layout, self._paths = parts, layout, list(paths)
        self._rows, self._scored, self._rejected = (Metrics.counter(NAMESPACE, n) for n in ("rows", "scored",
                                                                                            "rejected"))

    def process(self, result: PredictionResult) -> None:
        chunk: Chunk = result.example
        self._write(output.part_name(chunk, "part"), self._layout.lines(chunk, result.inference))
        if chunk.rejects:
            self._write(output.part_name(chunk, "rejects"), output.reject_lines(self._paths[chunk.file], chunk))
        self._rows.inc(len(chunk.lines) + len(chunk.rejects))
        self._scored.inc(len(chunk.lines))
        self._rejected.inc(len(chunk.rejects))

    def _write(self, name: str, data: bytes) -> None:
        with FileSystems.create(posixpath.join(self._parts, name)) as f:
            f.write(data)


def build(pipeline: beam.Pipeline, files: Sequence[InputFile], columns: Columns, model_dir: str,
          layout: output.Layout, parts: str, chunk_rows: int) -> None:
    """The job's transforms: each file read in chunks, each chunk scored, each scored chunk a part under `parts`."""
    _ = (pipeline
         | "Files" >> beam.Create(list(enumerate(files)))
         | "Reshuffle" >> beam.Reshuffle()  # spread the files over the workers
         | "ReadAndEncode" >> beam.ParDo(_ReadFile(columns, chunk_rows))
         | "ServingDefault" >> RunInference(ServingDefaultHandler(model_dir))
         | "Write" >> beam.ParDo(_WriteChunk(parts, layout, [f.path for f in files])))


def beam_pipeline(beam_args: Sequence[str]) -> Callable[[], beam.Pipeline]:
    return lambda: beam.Pipeline(options=PipelineOptions(list(beam_args)))


def score_files(files: Sequence[InputFile], columns: Columns, model_dir: str, layout: output.Layout,
                output_dir: str, make_pipeline: Callable[[], beam.Pipeline], chunk_rows: int = CHUNK_ROWS) -> Counts:
    """Score every row of `files` with `model_dir`'s serving_default into `output_dir`, in a Beam pipeline
    from `make_pipeline` (`beam_pipeline(args)`, or a TFX Beam executor's own)."""
    start = time.monotonic()
    parts = posixpath.join(output_dir, PARTS_PREFIX + uuid.uuid4().hex[:12])
    pipeline = make_pipeline()
    build(pipeline, files, columns, model_dir, layout, parts, chunk_rows)
    result = pipeline.run()
    result.wait_until_finish()
    counts = {r.key.metric.name: r.committed for r in
              result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]}
    written = sorted(m.path for m in FileSystems.match([posixpath.join(parts, "*")])[0].metadata_list)
    targets = []
    for index, file in enumerate(files):
        target = posixpath.join(output_dir, f"{file.output_name}.{layout.format}")
        mine = [p for p in written if posixpath.basename(p).startswith(f"{index:06d}-") and p.endswith(".part")]
        output.concatenate(target, layout.header(), mine)
        targets.append(target)
    rejects = posixpath.join(output_dir, output.REJECTS_FILE)
    output.concatenate(rejects, output.reject_header(), [p for p in written if p.endswith(".rejects")])
    # GCS deletes a "directory" as a prefix ending in "/" (apache_beam/io/gcp/gcsfilesystem.py delete); a local
    # path with one would match the files in it and leave the directory.
    FileSystems.delete([parts + "/" if parts.startswith("gs://") else parts])
    return Counts(counts.get("rows", 0), counts.get("scored", 0), counts.get("rejected", 0),
                  time.monotonic() - start, tuple(targets), rejects)
