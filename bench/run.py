"""`make bench`: four comparisons measured side by side in one run on this machine.

1. local: this pipeline (`make run`, caching off) vs TFX's own penguin example
   on the same bundled rows, each in a fresh process so imports count for both;
2. trainer: the custom loop vs `model.fit` (bench/trainer_bench.py, when present);
3. scale: generated penguin-like data at each --sizes row count through the
   full pipeline with Beam settings chosen for the size: seconds, peak memory
   and rows/s/core per component, with a plot;
4. taxi: this pipeline on configs/taxi.yaml vs TFX's own Chicago taxi example
   on the same rows: wall time and eval AUC (bench/taxi.py);
5. analyzer cache: a rolling window's next run with Transform's analyzer
   cache vs without it (bench/analyzer_cache.py);
6. input: the trainer's input pipeline without and with its tf.data fixes,
   and the cost of the trainer's input-bound check (bench/input_bench.py);
7. ExampleGen alone at each --sizes row count: ours vs TFX's CsvExampleGen on
   the same files (bench/example_gen_bench.py), with a plot;
8. predict at each --predict-sizes row count: `python -m pipeline predict` vs
   TFX's BulkInferrer on the same rows and model, rows/s and peak memory
   (bench/predict_bench.py).
9. width: generated tables of each --widths numeric columns at 1,000 rows
   through the full pipeline beside penguins in the same run, each
   component's seconds and the peak memory as ratios to penguins', with a plot
   (bench/width.py).
10. quality: real public tables (--quality-tables) through the pipeline by
   config alone, the pushed model scored on held-out rows through
   serving_default beside a linear model and HistGradientBoosting, each run's
   time against penguins', with a plot (bench/quality.py).

Results are merged into bench/results/<date>.json and summarised in
bench/results/<date>.md (also printed).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench import local, quality, quality_report, quality_tables, taxi, tfx_penguin, width
from bench.analyzer_cache import WINDOW, bench_analyzer_cache
from bench.data_generator import write_dataset
from bench.example_gen_bench import bench_example_gen, plot_example_gen
from bench.measure import run_measured
from bench.predict_bench import bench_predict
from bench.results_md import markdown
from bench.scale_plot import plot_scale
from bench.side_by_side import CONFIG_FILE, ENV, beam_settings, fastest, measure, measure_example, measure_ours
from pipeline.config import REPO_ROOT, load_config, resolve

RESULTS_DIR = REPO_ROOT / "bench" / "results"
LOCAL_TARGET_RATIO = 0.25     # our wall time <= 0.25x the TFX example's
SCALE_TARGET_SECONDS = 20 * 60  # the largest size end to end
# Memory bounded as the rows grow: peak RSS at the largest size <= 1.5x that at the next size down.
PEAK_GROWTH_TARGET = 1.5
TRAINER_BENCH = REPO_ROOT / "bench" / "trainer_bench.py"


def bench_local(work: Path, repeat: int = 1, before: Path | None = None) -> dict:
    """Ours and theirs alternately, `repeat` times each; the fastest of each side
    counts, which is the fairest figure on a machine shared with other work. Each
    round also times a no-change rerun and, with `before`, the same run from that
    checkout (bench/local.py)."""
    data_root = work / "tfx-data"
    config = load_config(CONFIG_FILE)
    tfx_penguin.write_example_data(next(Path(resolve(config.data.input_dir)).glob("*.csv")), data_root)
    ours_runs, theirs_runs, reruns, before_runs = [], [], [], []
    for i in range(repeat):
        ours_runs.append(measure_ours(work / f"ours-{i}", str(work / f"ours-{i}.log"), "our pipeline"))
        theirs_runs.append(measure_example(tfx_penguin, str(work / f"theirs-{i}"), str(data_root),
                                           str(work / f"theirs-{i}.log"), "TFX's penguin example"))
        print(f"  round {i + 1}: ours {ours_runs[-1]['wall_seconds']:.1f}s, "
              f"theirs {theirs_runs[-1]['wall_seconds']:.1f}s", flush=True)
        if before:
            before_runs.append(_before_run(work, i, before))
        reruns.append(_rerun(work, i))
    result = {**fastest(ours_runs, theirs_runs, LOCAL_TARGET_RATIO), "rerun": local.summarise_reruns(reruns)}
    if before:
        result["before_after"] = local.before_after(before_runs, result["ours"], before)
    return result


def _rerun(work: Path, i: int) -> dict:
    r = local.rerun(work / f"rerun-{i}", str(work / f"rerun-{i}"))
    print(f"  round {i + 1}: rerun {r['wall_seconds']:.1f}s, imports alone {r['imports_wall_seconds']:.1f}s",
          flush=True)
    return r


def _before_run(work: Path, i: int, checkout: Path) -> dict:
    root = work / f"before-{i}"
    config = load_config(CONFIG_FILE, [f"pipeline.root={root}"])
    r = measure(local.before_command(checkout, str(root)), str(work / f"before-{i}.log"), f"the run from {checkout}",
                config.pipeline.metadata_path, config.pipeline.name,
                env={**ENV, "PYTHONPATH": str(checkout)}, cwd=checkout)
    print(f"  round {i + 1}: before {r['wall_seconds']:.1f}s", flush=True)
    return r


def bench_trainer(work: Path, transform_dir: Path | None) -> dict:
    """bench/trainer_bench.py's `run()` in its own process, on our local run's
    transformed data when there is one."""
    if not TRAINER_BENCH.exists():
        return {"skipped": "bench/trainer_bench.py is not in this checkout (an older commit)"}
    code = ("import json, sys\n"
            "from bench.trainer_bench import format_report, run\n"
            "report = run(transform_dir=sys.argv[2] or None)\n"
            "report['text'] = format_report(report)\n"
            "json.dump(report, open(sys.argv[1], 'w'))\n")
    out = work / "trainer.json"
    measured = run_measured([sys.executable, "-c", code, str(out), str(transform_dir or "")],
                            str(work / "trainer.log"), env=ENV, cwd=REPO_ROOT)
    if measured.returncode != 0 or not out.exists():
        tail = Path(measured.log_file).read_text()[-2000:]
        return {"failed": f"run() from bench/trainer_bench.py exited with {measured.returncode}", "log_tail": tail}
    return {"wall_seconds": round(measured.wall_seconds, 2), **json.loads(out.read_text())}


def bench_input(work: Path) -> dict:
    """bench/input_bench.py in its own process (the trainer turns on op determinism for the whole process)."""
    out = work / "input.json"
    measured = run_measured([sys.executable, "-m", "bench.input_bench", "--json", str(out)],
                            str(work / "input.log"), env=ENV, cwd=REPO_ROOT)
    if measured.returncode != 0 or not out.exists():
        tail = Path(measured.log_file).read_text()[-2000:]
        return {"failed": f"bench/input_bench.py exited with {measured.returncode}", "log_tail": tail}
    from bench.input_bench import format_report

    report = json.loads(out.read_text())
    return {"wall_seconds": round(measured.wall_seconds, 2), **report, "text": format_report(report)}


def bench_scale(work: Path, sizes: list[int]) -> dict:
    runs = {}
    for rows in sizes:
        data = work / f"data-{rows}"
        t0 = time.perf_counter()
        shards = write_dataset(data, rows, seed=rows)
        generate_seconds = time.perf_counter() - t0
        root = work / f"scale-{rows}"
        overrides = [f"data.input_dir={data}", *beam_settings(rows)]
        print(f"scale: {rows} rows ({len(shards)} CSV shards, generated in {generate_seconds:.1f}s), "
              f"{' '.join(overrides[1:])} ...", flush=True)
        r = measure_ours(root, str(work / f"scale-{rows}.log"), f"the {rows}-row run", overrides)
        _add_throughput(r, rows)
        runs[str(rows)] = {"generate_seconds": round(generate_seconds, 1), "beam": overrides[1:], **r}
        print(f"  {rows} rows: {r['wall_seconds']:.0f}s, peak {r['peak_rss_mb']:.0f} MB", flush=True)
    return summarize_scale(runs)


def summarize_scale(runs: dict) -> dict:
    """The scale runs (by row count) with how time and memory grew between the sizes."""
    sizes = sorted(int(n) for n in runs)
    result = {"runs": runs}
    if len(sizes) >= 2:
        small, large = str(min(sizes)), str(max(sizes))
        row_ratio = max(sizes) / min(sizes)
        growth = {}
        for name, c in runs[large]["components"].items():
            before = runs[small]["components"].get(name, {}).get("seconds")
            if before and before >= 0.5:  # sub-second components are noise, not growth
                growth[name] = round(c["seconds"] / before, 2)
        result.update(row_ratio=row_ratio, growth=growth,
                      superlinear=[n for n, g in growth.items() if g > row_ratio],
                      total_growth=round(runs[large]["wall_seconds"] / runs[small]["wall_seconds"], 2))
        below, top = runs[str(sizes[-2])]["peak_rss_mb"], runs[str(sizes[-1])]["peak_rss_mb"]
        result["peak_growth"] = {"rows": sizes[-2:], "ratio": round(top / below, 2), "target": PEAK_GROWTH_TARGET,
                                 "met": top <= PEAK_GROWTH_TARGET * below}
    largest = runs[str(max(sizes))]
    result.update(target_seconds=SCALE_TARGET_SECONDS,
                  largest_within_target=largest["wall_seconds"] <= SCALE_TARGET_SECONDS)
    return result


def _add_throughput(run: dict, rows: int) -> None:
    """Rows per second per core, for the whole run and each component that took a second or more
    (shorter ones are fixed cost, not throughput)."""
    cores = os.cpu_count() or 1
    run["rows_per_second_per_core"] = round(rows / run["wall_seconds"] / cores)
    for c in run["components"].values():
        if (c.get("seconds") or 0) >= 1.0:
            c["rows_per_second_per_core"] = round(rows / c["seconds"] / cores)


def machine() -> dict:
    return {"cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)}


def _stamped(part, *args) -> dict:
    """A part's result with when it ran and how busy the machine was meanwhile
    (other work shares it), so sections merged from different runs keep their context."""
    start = _load()
    result = part(*args)
    return {**result, "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": {"start": start, "end": _load()}}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def merge_results(path: Path, new: dict) -> dict:
    """Runs on the same day add to that day's file, section by section."""
    old = json.loads(path.read_text()) if path.exists() else {}
    return {**old, **new}


def parse_sizes(text: str, flag: str = "--sizes", what: str = "row counts") -> list[int]:
    try:
        sizes = [int(s.replace("_", "")) for s in text.replace(",", " ").split()]
    except ValueError:
        raise SystemExit(f"{flag}: expected {what} like '100,1000', got {text!r}") from None
    if any(s < 1 for s in sizes):
        raise SystemExit(f"{flag}: {what} must be positive, got {text!r}")
    return sorted(set(sizes))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000",
                        help="row counts for the scale runs, comma separated; empty skips them")
    parser.add_argument("--skip", action="append", default=[],
                        choices=["local", "trainer", "scale", "taxi", "cache", "input", "example_gen", "predict",
                                 "width", "quality"])
    parser.add_argument("--predict-sizes", default="1000000,10000000",
                        help="row counts for the predict comparison, comma separated; empty skips it")
    parser.add_argument("--predict-tfx-max-rows", type=int, default=1_000_000,
                        help="largest size at which TFX's BulkInferrer runs too")
    parser.add_argument("--widths", default="10,100,1000",
                        help="numeric columns of the width sweep's tables, comma separated; empty skips it")
    parser.add_argument("--cache-rows", type=int, default=100_000,
                        help="rows per span in the analyzer cache comparison")
    parser.add_argument("--example-gen-tfx-max-rows", type=int, default=1_000_000,
                        help="largest size at which TFX's CsvExampleGen runs too (it took 833 s at 10M rows)")
    parser.add_argument("--repeat", type=int, default=2, choices=range(1, 6), metavar="{1..5}",
                        help="local comparison rounds; the fastest of each side counts")
    parser.add_argument("--quality-tables", default="", help="the quality part's tables, comma separated; "
                        f"default all: {', '.join(quality_tables.TABLES)}")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR), help="where <date>.json and <date>.md go")
    parser.add_argument("--keep", action="store_true", help="keep the runs' output directories")
    parser.add_argument("--before", metavar="CHECKOUT", type=Path,
                        help="also run an earlier checkout (with its .venv) in each local round: before/after table")
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    widths = parse_sizes(args.widths, "--widths", "column counts")
    quality_tables_ = quality_tables.parse(args.quality_tables)
    before = local.check_before(args.before) if args.before else None
    # Reading results back through TFMA logs deprecation warnings; they aren't ours to fix.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)

    work = Path(tempfile.mkdtemp(prefix="bench-"))
    today = datetime.datetime.now(datetime.timezone.utc)
    results: dict = {"date": today.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine()}
    keep = args.keep
    try:
        # Warm the page cache so neither side pays for the first cold import of TF/TFX.
        subprocess.run([sys.executable, "-c", "import tfx.v1, tensorflow_transform, tensorflow_model_analysis"],
                       env={**os.environ, **ENV}, check=True, capture_output=True)
        if "local" not in args.skip:
            print("local: our pipeline, then TFX's penguin example ...", flush=True)
            results["local"] = _stamped(bench_local, work, args.repeat, before)
            print(f"  ratio {results['local']['ratio']:.2f}x", flush=True)
        if "trainer" not in args.skip:
            print("trainer: custom loop vs model.fit ...", flush=True)
            ours = Path(load_config(CONFIG_FILE, [f"pipeline.root={work / 'ours-0'}"]).pipeline.pipeline_root,
                        "Transform")
            results["trainer"] = _stamped(bench_trainer, work, ours if ours.is_dir() else None)
        if sizes and "scale" not in args.skip:
            results["scale"] = _stamped(bench_scale, work, sizes)
        if widths and "width" not in args.skip:
            results["width"] = _stamped(width.bench_width, work, widths, args.repeat)
        if "taxi" not in args.skip:
            print("taxi: our pipeline on configs/taxi.yaml, then TFX's taxi example ...", flush=True)
            results["taxi"] = _stamped(taxi.bench_taxi, work, args.repeat)
            print(f"  ratio {results['taxi']['ratio']:.2f}x, AUC ours {results['taxi']['ours']['auc']} "
                  f"theirs {results['taxi']['theirs']['auc']}", flush=True)
        if "cache" not in args.skip:
            print(f"analyzer cache: window({WINDOW}) of {args.cache_rows}-row spans, next run with vs without ...",
                  flush=True)
            results["analyzer_cache"] = _stamped(bench_analyzer_cache, work, args.cache_rows,
                                                 beam_settings(args.cache_rows * WINDOW))
            print(f"  Transform ratio {results['analyzer_cache']['transform_ratio']:.2f}x, "
                  f"whole run {results['analyzer_cache']['wall_ratio']:.2f}x", flush=True)
        if "input" not in args.skip:
            print("input: the trainer's input pipeline without and with its tf.data fixes ...", flush=True)
            results["input"] = _stamped(bench_input, work)
            print(results["input"].get("text") or results["input"].get("failed"), flush=True)
        if sizes and "example_gen" not in args.skip:
            print("ExampleGen: ours vs TFX's CsvExampleGen on the same files ...", flush=True)
            results["example_gen"] = _stamped(bench_example_gen, work, sizes, beam_settings,
                                              args.example_gen_tfx_max_rows)
        predict_sizes = parse_sizes(args.predict_sizes) if args.predict_sizes else []
        if predict_sizes and "predict" not in args.skip:
            print("predict: ours vs TFX's BulkInferrer on the same rows and model ...", flush=True)
            results["predict"] = _stamped(bench_predict, work, predict_sizes, beam_settings,
                                          args.predict_tfx_max_rows)
        if "quality" not in args.skip:
            print("quality: real tables by config alone vs a linear model and a GBM ...", flush=True)
            penguins = results.get("local", {}).get("ours", {}).get("wall_seconds")
            results["quality"] = _stamped(quality.bench_quality, work / "quality", quality_tables_, [],
                                          quality.DEFAULT_CACHE, penguins)
    except BaseException:
        keep = True  # the logs say what went wrong
        raise
    finally:
        if keep:
            print(f"outputs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_dir / f"{today:%Y-%m-%d}.json"
    merged = merge_results(json_path, results)
    json_path.write_text(json.dumps(merged, indent=2, default=_json_default) + "\n")
    if "example_gen" in results:
        plot_example_gen(merged["example_gen"], results_dir / f"{today:%Y-%m-%d}-example-gen.png")
    if "width" in results:
        width.plot_width(merged["width"], results_dir / f"{today:%Y-%m-%d}-width.png")
    if "quality" in results:
        quality_report.plot(merged["quality"], results_dir / f"{today:%Y-%m-%d}-quality.png")
    if "scale" in results:
        plot_scale(merged["scale"], results_dir / f"{today:%Y-%m-%d}-scale.png")
    md = markdown(merged)
    (results_dir / f"{today:%Y-%m-%d}.md").write_text(md + "\n")
    print(md)
    print(f"results: {json_path}")
    return 0


def _json_default(x):
    if dataclasses.is_dataclass(x):
        return dataclasses.asdict(x)
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


if __name__ == "__main__":
    sys.exit(main())
