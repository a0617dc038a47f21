"""ExampleGen alone: ours (components/data/csv_examples.py) vs TFX's CsvExampleGen on the same generated files.

Each side runs its executor in a fresh process (`python -m bench.example_gen_bench ours|tfx IN OUT`, imports
included) with the local Beam settings the pipeline uses at that size (bench/side_by_side.py `beam_settings`), watched
for wall time and the process tree's peak RSS (bench/measure.py). The two alternate at each size; the ratio is
ours / TFX's. Above `tfx_max_rows` TFX's side is skipped (833 s at 10M rows on this machine, 2026-11-30).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bench.data_generator import write_dataset
from bench.measure import run_measured
from bench.side_by_side import ENV
from pipeline.config import REPO_ROOT, load_config

SIDES = ("ours", "tfx")


def bench_example_gen(work: Path, sizes: list[int], beam_settings, tfx_max_rows: int) -> dict:
    runs: dict[str, dict] = {}
    for rows in sizes:
        data = work / f"eg-data-{rows}"
        t0 = time.perf_counter()
        write_dataset(data, rows, seed=rows)
        generated = time.perf_counter() - t0
        beam_args = load_config(REPO_ROOT / "configs" / "local.yaml", beam_settings(rows)).beam.args
        result: dict = {"generate_seconds": round(generated, 1), "beam_args": beam_args}
        for side in SIDES:
            if side == "tfx" and rows > tfx_max_rows:
                result[side] = {"skipped": f"above {tfx_max_rows} rows"}
                continue
            out = work / f"eg-{side}-{rows}"
            m = run_measured([sys.executable, "-m", "bench.example_gen_bench", side, str(data), str(out), *beam_args],
                             str(work / f"eg-{side}-{rows}.log"), env=ENV, cwd=REPO_ROOT)
            if m.returncode != 0:
                raise RuntimeError(f"ExampleGen ({side}, {rows} rows) exited with {m.returncode}: see {m.log_file}")
            result[side] = {"wall_seconds": round(m.wall_seconds, 1), "peak_rss_mb": round(m.peak_rss_mb),
                            "rows_per_second_per_core": round(rows / m.wall_seconds / (os.cpu_count() or 1))}
            print(f"  ExampleGen {side}, {rows} rows: {m.wall_seconds:.1f}s, peak {m.peak_rss_mb:.0f} MB", flush=True)
        if "wall_seconds" in result["tfx"]:
            result["ratio"] = round(result["ours"]["wall_seconds"] / result["tfx"]["wall_seconds"], 3)
        runs[str(rows)] = result
    return {"runs": runs, "cpus": os.cpu_count()}


def plot_example_gen(result: dict, path: Path) -> None:
    """Seconds against rows, both sides, log-log: the curve `make bench` shows (bench/results/)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for side, label in (("ours", "ours (components/data/csv_examples.py)"), ("tfx", "TFX CsvExampleGen")):
        points = sorted((int(n), r[side]["wall_seconds"]) for n, r in result["runs"].items()
                        if "wall_seconds" in r[side])
        if points:
            ax.plot(*zip(*points), marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="rows", ylabel="wall seconds (fresh process)",
           title=f"ExampleGen on generated penguin-like rows, {result['cpus']} cores")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _run(side: str, input_base: str, out: str, beam_args: list[str]) -> None:
    """One executor on `input_base`'s CSV files, hash-split 2:1 as the pipeline splits (configs/local.yaml)."""
    from tfx.components.example_gen.csv_example_gen import executor as csv_executor
    from tfx.dsl.components.base import base_beam_executor
    from tfx.proto import example_gen_pb2
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from components.data import csv_examples
    from pipeline.dag.splits import split_output

    config = load_config(REPO_ROOT / "configs" / "local.yaml")
    executor = {"ours": csv_examples.Executor, "tfx": csv_executor.Executor}[side](
        base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=beam_args))
    examples = standard_artifacts.Examples()
    examples.uri = out
    executor.Do({}, {"examples": [examples]}, {
        "input_base": input_base,
        "input_config": proto_utils.proto_to_json(example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*")])),
        "output_config": proto_utils.proto_to_json(split_output(config)),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP})


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in SIDES:
        raise SystemExit(f"usage: python -m bench.example_gen_bench {{{'|'.join(SIDES)}}} INPUT_DIR OUTPUT_DIR "
                         "[BEAM_ARG ...]")
    _run(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
