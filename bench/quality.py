"""`make bench`, quality part: real public tables through the pipeline by config alone, the pushed model scored on
held-out rows through its serving_default, beside a linear model and scikit-learn's HistGradientBoosting.

Per table (bench/quality_tables.py): the rows as CSV minus a held-out share (bench/quality_data.py), a config with
only what a user sets, `python -m pipeline run` in a fresh process (timed, beside a penguins `make run` of the same
invocation), then `python -m pipeline predict`'s code (components/scoring) on the held-out CSV with the pushed
version, and the baselines fit on the pipeline's rows (bench/baselines.py). Figures: bench/quality_metrics.py.

Fast iteration (docs/benchmarks.md): `python -m bench.quality --tables diamonds,hpc_data --set trainer.key=value`
reuses the prepared CSVs and the baselines' scores from --cache, so a rerun reruns only our pipeline.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Optional

import pandas as pd

from bench import baselines, quality_metrics, quality_report, quality_tables
from bench.quality_data import HELDOUT_RULE, Prepared, prepare, write_config
from bench.quality_tables import ROW_KEY, Table
from bench.side_by_side import measure_ours
from pipeline.config import REPO_ROOT, load_config

DEFAULT_OUT = REPO_ROOT / "output" / "bench-quality"
DEFAULT_CACHE = REPO_ROOT / "output" / "bench-quality-cache"
# serving_default's output each task's metric reads (trainer/tasks.py).
_PREDICTED = {"binary": "probability", "multiclass": "class_name", "regression": "prediction"}
# The run summary ends where it lists paths; the snapshot's digest is no verdict.
_SUMMARY_END = "artifacts:"
_NOT_SAID = ("data snapshot:", "  serving labels now:")
_PUSHED_PATH = re.compile(r"^pushed: \S+ \(version (\w+)\)$")


def bench_quality(out: Path, tables: list[Table], overrides: list[str] = (), cache: Path = DEFAULT_CACHE,
                  penguins_seconds: Optional[float] = None, refit: bool = False) -> dict:
    """Every table's figures, the penguins run they are timed against, and the mean gap closed."""
    out.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    penguins = {"wall_seconds": penguins_seconds, "measured": "by part 1 of this bench run"}
    if penguins_seconds is None:
        print("quality: penguins `make run`, the time every table is compared with ...", flush=True)
        root = _fresh(out / "runs" / "penguins")
        run = measure_ours(root, str(out / "penguins.log"), "penguins (quality baseline)")
        penguins = {"wall_seconds": run["wall_seconds"], "measured": "by this part, before the tables"}
    results = {}
    for table in tables:
        prepared = prepare(table, cache)
        print(f"quality: {table.name} ({table.package}/{table.item}, {table.task}): {prepared.rows:,} rows to the "
              f"pipeline, {prepared.heldout_rows:,} held out{' (cached CSVs)' if prepared.reused else ''} ...",
              flush=True)
        fitted = baselines.scores(prepared, refit)
        results[table.name] = run_table(prepared, out, overrides, fitted, penguins["wall_seconds"])
        print("  " + quality_report.one_line(results[table.name]), flush=True)
    return summarise(results, penguins, list(overrides))


def _fresh(root: Path) -> Path:
    """An empty pipeline root: a model left serving there would be the Evaluator's baseline and change the verdict."""
    shutil.rmtree(root, ignore_errors=True)
    return root


def run_table(prepared: Prepared, out: Path, overrides: list[str], fitted: dict,
              penguins_seconds: Optional[float]) -> dict:
    """Our pipeline on the table in a fresh process, its pushed model scored on the held-out rows."""
    from pipeline.runs.summary import summarize

    table = prepared.table
    root = _fresh(out / "runs" / table.name)
    config_file = write_config(prepared, root, out / "configs" / f"{table.name}.yaml")
    log = out / f"{table.name}.log"
    run = measure_ours(root, str(log), f"the pipeline on {table.name}", list(overrides), config_file=config_file)
    config = load_config(config_file, [f"pipeline.root={root}", *overrides])
    summary = summarize(config.pipeline.metadata_path, config.pipeline.name)
    result = {"package": table.package, "item": table.item, "task": table.task, "metric": table.metric,
              "label": table.label, "rows": prepared.rows, "heldout_rows": prepared.heldout_rows,
              "ignored": list(table.ignore), "config": str(config_file), "log": str(log),
              "wall_seconds": run["wall_seconds"], "peak_rss_mb": run["peak_rss_mb"],
              "components": {n: c["seconds"] for n, c in run["components"].items()},
              "x_penguins": round(run["wall_seconds"] / penguins_seconds, 2) if penguins_seconds else None,
              "blessed": summary.blessed, "pushed_version": summary.pushed_version,
              "said": said(log.read_text()), "linear": fitted["linear"]["value"], "gbm": fitted["gbm"]["value"],
              "baselines": fitted, "data_reused": prepared.reused, "ours": None}
    if summary.pushed_path:
        scored = score_pushed(prepared, config_file, [f"pipeline.root={root}", *overrides], summary,
                              out / "predictions" / table.name)
        result.update(scored)
    result["gap_closed"] = _round(quality_metrics.gap_closed(result["ours"], result["linear"], result["gbm"]))
    result["beats_linear"] = quality_metrics.beats(table, result["ours"], result["linear"])
    return result


def score_pushed(prepared: Prepared, config_file: Path, overrides: list[str], summary, out: Path) -> dict:
    """The held-out CSV through `python -m pipeline predict`'s code with the version this run pushed: serialized
    tf.Examples of the raw columns into serving_default, as a TF Serving client sends them (the columns and their
    types from the version's own record of its inputs)."""
    from pipeline.predict import predict

    table = prepared.table
    config = load_config(config_file, [*overrides, f"predict.keep=[{ROW_KEY}]"])
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    counts = predict(config, str(prepared.heldout_csv), str(out), version=int(summary.pushed_version))
    seconds = time.perf_counter() - start
    if not counts["scored"]:
        raise RuntimeError(f"{table.name}: predict scored none of the {counts['rows']} held-out rows; why, by line: "
                           f"{counts['rejects']}")
    predicted = pd.read_csv(Path(counts["outputs"][0]), low_memory=False)
    heldout = pd.read_csv(prepared.heldout_csv, usecols=[ROW_KEY, table.label], low_memory=False)
    joined = heldout.merge(predicted[[ROW_KEY, _PREDICTED[table.task]]], on=ROW_KEY, how="inner")
    labels = quality_metrics.truth(table, joined[table.label])
    value = quality_metrics.value(table, labels, joined[_PREDICTED[table.task]].to_numpy())
    return {"ours": round(value, 6), "scored": counts["scored"], "rejected": counts["rejected"],
            "predict_seconds": round(seconds, 1)}


def said(log: str) -> list[str]:
    """What the run's printed summary said (its last one in the log): the lines after the component timings, up to
    where it lists paths, without the snapshot's digest."""
    lines = log.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith("run ")), default=None)
    if start is None:
        return []
    out, in_components = [], False
    for line in lines[start + 1:]:
        if line.startswith(_SUMMARY_END):
            break
        if line.startswith("components:"):
            in_components = True
        elif not (in_components and line.startswith("  ")):
            in_components = False
            if line.strip() and not line.startswith(_NOT_SAID):
                # The pushed version's path is the run's temporary root: the version says it.
                out.append(_PUSHED_PATH.sub(r"pushed: version \1", line.rstrip()))
    return out


def summarise(results: dict, penguins: dict, overrides: list[str]) -> dict:
    """The tables' figures with issue 45's two targets: every table beats the linear model, and the mean gap closed
    (over every table: one without a figure misses the target) is at least TARGET_GAP."""
    gaps = [r["gap_closed"] for r in results.values() if r["gap_closed"] is not None]
    mean = _round(sum(gaps) / len(gaps)) if gaps else None
    return {"tables": results, "penguins": penguins, "overrides": overrides, "heldout": HELDOUT_RULE,
            "mean_gap_closed": mean, "gaps_counted": len(gaps), "target_gap": quality_report.TARGET_GAP,
            "gap_target_met": mean is not None and len(gaps) == len(results) and mean >= quality_report.TARGET_GAP,
            "all_beat_linear": all(r["beats_linear"] for r in results.values())}


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x, 3)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default="",
                        help=f"comma separated, default all: {', '.join(quality_tables.TABLES)}")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="a config override for every table's run (e.g. trainer.learning_rate=0.003)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="runs, logs and quality.json/.md/.png")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="prepared CSVs and baseline scores")
    parser.add_argument("--refit-baselines", action="store_true", help="fit the baselines again, not from --cache")
    parser.add_argument("--penguins-seconds", type=float,
                        help="time the tables against this penguins `make run` wall time instead of running one")
    args = parser.parse_args(argv)
    tables = quality_tables.parse(args.tables)
    start = time.perf_counter()
    result = bench_quality(args.out.resolve(), tables, args.overrides, args.cache.resolve(), args.penguins_seconds,
                           args.refit_baselines)
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    (args.out / "quality.json").write_text(json.dumps(result, indent=2) + "\n")
    quality_report.plot(result, args.out / "quality.png")
    text = "\n".join(quality_report.markdown(result))
    (args.out / "quality.md").write_text(text + "\n")
    print(text)
    print(f"results: {args.out / 'quality.json'} (and .md, .png); {result['wall_seconds']:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
