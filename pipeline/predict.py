"""`python -m pipeline predict`: score a directory of raw CSV rows (or one CSV) with a pushed model version."""

from __future__ import annotations

import json
import os
import posixpath
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from components import training_record
from components.data.csv_examples import csv_files
from components.errors import ComponentError, ModelInputsError
from components.scoring.job import SUMMARY_FILE, Counts, InputFile, beam_pipeline, score_files
from components.scoring.plan import plan
from components.serving import serving_dir
from components.serving.model_config import CANARY, STABLE
from pipeline.config import Config, resolve
from pipeline.dag.beam import beam_pipeline_args
from pipeline.data.checks import load_schema, require_features
from pipeline.errors import CommandFailed, ConfigError
from trainer import model_inputs


def choose_version(config: Config, version: Optional[int], label: Optional[str]) -> serving_dir.Version:
    """`version`, else the version serving under `label` (default stable: the model serving now)."""
    base = config.pipeline.serving_dir
    found = serving_dir.versions(base)
    if not found:
        raise CommandFailed(f"no pushed model under {base}: run the pipeline first (make run)")
    if version is None:
        chosen = serving_dir.canary(base) if label == CANARY else serving_dir.serving(base)
        if chosen is None:
            raise ConfigError(f"--label {label or STABLE}: no version serves under it in {base} "
                              "(`python -m pipeline serving status` shows the labels)")
        return chosen
    chosen = next((v for v in found if v.number == version), None)
    if chosen is None:
        raise ConfigError(f"--version {version}: not a pushed version under {base} "
                          f"(pushed: {', '.join(v.name for v in found)})")
    return chosen


def input_files(source: str) -> list[InputFile]:
    """The CSV files of a directory (*.csv, sharing one header, as a training run's) or one CSV file."""
    path = resolve(source)
    is_dir = os.path.isdir(path) or (path.startswith("gs://") and not path.endswith(".csv"))
    directory, pattern = (path, "*.csv") if is_dir else (posixpath.dirname(path), posixpath.basename(path))
    header, paths = csv_files(directory, pattern)
    return [InputFile(p, tuple(header), posixpath.splitext(posixpath.basename(p))[0]) for p in paths]


def runner_args(config: Config, runner: str, source: str, output_dir: str) -> list[str]:
    """The Beam job's args: the beam section's local runner, or DataflowRunner with the dataflow section exactly
    as the pipeline's Beam steps get it (pipeline/dag/beam.py: project, region, the pipeline image, accounts)."""
    if runner == "local":
        return config.beam.args
    if config.dataflow is None or not config.dataflow.enabled:
        raise ConfigError("--runner dataflow needs the config's dataflow section (and its vertex section: project, "
                          "region, pipeline image, service account), as in configs/vertex.yaml")
    for what, uri in (("--input", source), ("--output", output_dir), ("data.schema_file", config.data.schema_file)):
        if uri and not uri.startswith("gs://"):
            raise ConfigError(f"--runner dataflow: {what} must be a gs:// URI, the only storage Dataflow's workers "
                              f"see (got {uri!r})")
    return beam_pipeline_args(config)


def _schema(path: str):
    if path.startswith("gs://"):
        from tfx.utils import io_utils

        return io_utils.SchemaReader().read(path)
    return load_schema(path)


def _is_empty(directory: str) -> bool:
    if directory.startswith("gs://"):
        return not FileSystems.match([f"{directory.rstrip('/')}/*"])[0].metadata_list
    return not (os.path.isdir(directory) and os.listdir(directory))


def predict(config: Config, source: str, output_dir: str, version: Optional[int] = None,
            label: Optional[str] = None, runner: str = "local", format: Optional[str] = None) -> dict:
    """Score `source` into `output_dir` and return the summary (also written there as summary.json)."""
    config.predict.check_backend()
    source, output_dir = resolve(source), resolve(output_dir)
    args = runner_args(config, runner, source, output_dir)
    chosen = choose_version(config, version, label)
    if not _is_empty(output_dir):
        raise CommandFailed(f"--output {output_dir} is not empty; predict writes into a new or empty directory")
    try:
        files = input_files(source)
        columns, layout = plan(chosen.path, config.predict.keep, config.data.missing_values,
                               format or config.predict.format, *_fallback(config))
        counts = score_files(files, columns, chosen.path, layout, output_dir, beam_pipeline(args),
                             config.predict.chunk_rows)
    except ModelInputsError:
        raise ConfigError(f"version {chosen.name} was pushed before versions recorded the columns they read "
                          f"({model_inputs.path(chosen.path)} is missing), and the config has no data.schema_file: "
                          "set it to the schema that version was trained with (`python -m pipeline schema infer` "
                          "writes one from the data), or push a new version (make run)") from None
    except (ComponentError, ValueError) as e:
        raise CommandFailed(str(e)) from None
    record = training_record.read(config.pipeline.serving_dir, chosen.name)
    summary = summary_of(counts, chosen, record)
    with FileSystems.create(posixpath.join(output_dir, SUMMARY_FILE)) as f:
        f.write(json.dumps(summary, indent=1, sort_keys=True).encode())
    return summary


def _fallback(config: Config) -> tuple:
    """(schema, features) to read a version without a record of its inputs by: the config's schema file, if any."""
    if not config.data.schema_file:
        return None, None
    return _schema(resolve(config.data.schema_file)), require_features(config)


def summary_of(counts: Counts, version: serving_dir.Version, record) -> dict:
    return {**counts.as_dict(), "rows_per_second": round(counts.rows_per_second, 1),
            "model_version": version.name, "model_path": version.path,
            "record": record.describe() if record is not None else "none (pushed before records were kept)"}


def format_summary(summary: dict) -> str:
    return "\n".join([
        f"scored {summary['scored']:,} of {summary['rows']:,} rows with model version {summary['model_version']} "
        f"({summary['record']})",
        f"rejected: {summary['rejected']:,}" + (f" (reasons and line numbers in {summary['rejects']})"
                                                 if summary["rejected"] else ""),
        f"time: {summary['seconds']:.1f} s, {summary['rows_per_second']:,.0f} rows/s",
        "predictions: " + ", ".join(summary["outputs"]),
    ])


def cmd_predict(config: Config, args) -> int:
    from pipeline.errors import EXIT_OK

    summary = predict(config, args.input, args.output, args.version, args.label, args.runner, args.format)
    print(format_summary(summary))
    return EXIT_OK
