"""Batch prediction: `python -m pipeline predict` vs TFX's BulkInferrer on the same generated rows and model.

One model for both: this pipeline on the bundled data (caching off), its pushed version. At each size the rows
are generated (bench/data_generator.py) as CSV shards; ours scores the CSV files with the command itself in a fresh
process (`python -m pipeline predict`, imports included); TFX's BulkInferrer executor scores the same rows as
Examples, which our ExampleGen writes first (timed apart: TFX's pipeline needs that step, ours does not), in a fresh
process too (`python -m bench.predict_bench tfx EXAMPLES MODEL OUT [BEAM_ARG ...]`). Both with the local Beam settings
the pipeline uses at that size (bench/side_by_side.py `beam_settings`), watched for wall time and the process
tree's peak RSS (bench/measure.py). Above `tfx_max_rows` TFX's side is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.data_generator import write_dataset
from bench.measure import run_measured
from bench.side_by_side import CONFIG_FILE, ENV, our_command
from pipeline.config import REPO_ROOT, load_config

PEAK_GROWTH_TARGET = 1.5  # the largest size's peak <= 1.5x the next size down's: memory bounded as the rows grow


def _model(work: Path) -> str:
    """A pushed version of this pipeline on the bundled data."""
    from components.serving import serving_dir

    root = work / "predict-model"
    subprocess.run(our_command(str(root)), env={**os.environ, **ENV}, cwd=REPO_ROOT, check=True,
                   capture_output=True)
    version = serving_dir.serving(load_config(CONFIG_FILE, [f"pipeline.root={root}"]).pipeline.serving_dir)
    if version is None:
        raise RuntimeError(f"the bench's training run under {root} pushed no model")
    return str(root)


def bench_predict(work: Path, sizes: list[int], beam_settings, tfx_max_rows: int) -> dict:
    root = _model(work)
    model_dir = load_config(CONFIG_FILE, [f"pipeline.root={root}"]).pipeline.serving_dir
    from components.serving import serving_dir

    version = serving_dir.serving(model_dir)
    runs: dict[str, dict] = {}
    for rows in sizes:
        data = work / f"pr-data-{rows}"
        t0 = time.perf_counter()
        write_dataset(data, rows, seed=rows)
        result: dict = {"generate_seconds": round(time.perf_counter() - t0, 1), "beam": beam_settings(rows)}
        out = work / f"pr-ours-{rows}"
        sets = [f"pipeline.root={root}", *beam_settings(rows)]
        m = run_measured([sys.executable, "-m", "pipeline", "predict", "--config", str(CONFIG_FILE),
                          *[a for s in sets for a in ("--set", s)], "--input", str(data), "--output", str(out)],
                         str(work / f"pr-ours-{rows}.log"), env=ENV, cwd=REPO_ROOT)
        if m.returncode != 0:
            raise RuntimeError(f"predict ({rows} rows) exited with {m.returncode}: see {m.log_file}")
        summary = json.loads((out / "summary.json").read_text())
        if summary["scored"] + summary["rejected"] != rows:
            raise RuntimeError(f"predict read {summary['rows']} of {rows} rows: see {out}")
        result["ours"] = {"wall_seconds": round(m.wall_seconds, 1), "peak_rss_mb": round(m.peak_rss_mb),
                          "rows_per_second": round(rows / m.wall_seconds), "job_seconds": summary["seconds"],
                          "job_rows_per_second": round(summary["rows_per_second"]), "rejected": summary["rejected"]}
        print(f"  predict, {rows} rows: {m.wall_seconds:.1f}s ({rows / m.wall_seconds:,.0f} rows/s), "
              f"peak {m.peak_rss_mb:.0f} MB", flush=True)
        if rows <= tfx_max_rows:
            result["tfx"] = _bench_tfx(work, data, rows, version.path, beam_settings)
            result["speedup"] = round(result["ours"]["rows_per_second"] / result["tfx"]["rows_per_second"], 2)
        else:
            result["tfx"] = {"skipped": f"above {tfx_max_rows} rows"}
        runs[str(rows)] = result
    out = {"runs": runs, "model_version": version.name, "cpus": os.cpu_count()}
    peaks = [runs[str(n)]["ours"]["peak_rss_mb"] for n in sizes]
    if len(peaks) > 1:
        out["peak_growth"] = round(peaks[-1] / peaks[-2], 2)
        out["peak_growth_target"] = PEAK_GROWTH_TARGET
    return out


def _bench_tfx(work: Path, data: Path, rows: int, model_dir: str, beam_settings) -> dict:
    beam_args = load_config(CONFIG_FILE, beam_settings(rows)).beam.args
    examples = work / f"pr-examples-{rows}"
    eg = run_measured([sys.executable, "-m", "bench.example_gen_bench", "ours", str(data), str(examples), *beam_args],
                      str(work / f"pr-examples-{rows}.log"), env=ENV, cwd=REPO_ROOT)
    if eg.returncode != 0:
        raise RuntimeError(f"ExampleGen for BulkInferrer ({rows} rows) exited with {eg.returncode}: see {eg.log_file}")
    numeric = work / "pr-model-numeric"
    if not numeric.exists():
        subprocess.run([sys.executable, "-m", "bench.predict_bench", "numeric", model_dir, str(numeric)],
                       env={**os.environ, **ENV}, cwd=REPO_ROOT, check=True, capture_output=True)
    out = work / f"pr-tfx-{rows}"
    m = run_measured([sys.executable, "-m", "bench.predict_bench", "tfx", str(examples), str(numeric), str(out),
                      *beam_args], str(work / f"pr-tfx-{rows}.log"), env=ENV, cwd=REPO_ROOT)
    if m.returncode != 0:
        raise RuntimeError(f"BulkInferrer ({rows} rows) exited with {m.returncode}: see {m.log_file}")
    print(f"  TFX BulkInferrer, {rows} rows: {m.wall_seconds:.1f}s ({rows / m.wall_seconds:,.0f} rows/s), "
          f"peak {m.peak_rss_mb:.0f} MB (its Examples first: {eg.wall_seconds:.1f}s)", flush=True)
    return {"wall_seconds": round(m.wall_seconds, 1), "peak_rss_mb": round(m.peak_rss_mb),
            "rows_per_second": round(rows / m.wall_seconds), "example_gen_seconds": round(eg.wall_seconds, 1)}


def _numeric_model(model_dir: str, out: str) -> None:
    """`model_dir` with a serving_default that returns its numeric outputs only: tfx-bsl 1.16's PredictionLog
    builder fails on a string output with one value per example, such as our class_name
    (tfx_bsl/beam/run_inference.py `_PredictModelHandler._post_process`: `output[i]` is a bytes object, which has no
    dtype), so TFX's BulkInferrer can score our model only without it. The same computation otherwise."""
    import tensorflow as tf

    class Numeric(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = tf.saved_model.load(model_dir)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve(self, examples):
            outputs = self.model.signatures["serving_default"](examples=examples)
            return {k: v for k, v in outputs.items() if v.dtype != tf.string}

    module = Numeric()
    tf.saved_model.save(module, out, signatures={"serving_default": module.serve})


def _run_tfx(examples_dir: str, model_dir: str, out: str, beam_args: list[str]) -> None:
    """TFX's BulkInferrer executor on every split of `examples_dir` with `model_dir`'s serving_default."""
    from tfx.components.bulk_inferrer import executor as bulk_inferrer
    from tfx.dsl.components.base import base_beam_executor
    from tfx.proto import bulk_inferrer_pb2
    from tfx.types import artifact_utils, standard_artifacts
    from tfx.utils import path_utils, proto_utils

    examples = standard_artifacts.Examples()
    examples.uri = examples_dir
    examples.split_names = artifact_utils.encode_split_names(
        sorted(p.name[len("Split-"):] for p in Path(examples_dir).glob("Split-*")))
    model = standard_artifacts.Model()
    model.uri = f"{out}-model"
    os.makedirs(model.uri)
    os.symlink(model_dir, path_utils.serving_model_dir(model.uri))
    result = standard_artifacts.InferenceResult()
    result.uri = out
    os.makedirs(out)
    executor = bulk_inferrer.Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=beam_args))
    executor.Do({"examples": [examples], "model": [model]}, {"inference_result": [result]}, {
        "data_spec": proto_utils.proto_to_json(bulk_inferrer_pb2.DataSpec()),
        "model_spec": proto_utils.proto_to_json(bulk_inferrer_pb2.ModelSpec(model_signature_name=["serving_default"]))})


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "numeric":
        _numeric_model(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == "tfx":
        _run_tfx(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        raise SystemExit("usage: python -m bench.predict_bench tfx EXAMPLES_DIR MODEL_DIR OUTPUT_DIR [BEAM_ARG ...]"
                         " | numeric MODEL_DIR OUTPUT_DIR")
