"""Running our pipeline and a TFX example in fresh processes and reading back what each did:
the parts `make bench`'s comparisons share (bench/run.py: penguins, bench/taxi.py: taxi)."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.measure import Measured
from pipeline.config import REPO_ROOT
from pipeline.runs.summary import ACCURACY, summarize

ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "1", "PYTHONPATH": str(REPO_ROOT)}
CONFIG_FILE = REPO_ROOT / "configs" / "local.yaml"


def our_command(root: str, overrides: list[str] = (), config_file: Path = CONFIG_FILE) -> list[str]:
    sets = [f"pipeline.root={root}", "pipeline.enable_cache=false", *overrides]
    return [sys.executable, "-m", "pipeline", "run", "--config", str(config_file),
            *[a for s in sets for a in ("--set", s)]]


def components(measured: Measured, metadata_path: str, pipeline_name: str) -> dict:
    """Per-component times from MLMD, each with the process tree's peak memory while it ran."""
    summary = summarize(metadata_path, pipeline_name)
    rows = {c.name: {"state": c.state, "seconds": round(c.seconds, 2),
                     "peak_rss_mb": _round(measured.peak_between(c.started, c.started + c.seconds))}
            for c in summary.components}
    start = min(c.started for c in summary.components)
    end = max(c.started + c.seconds for c in summary.components)
    return {"wall_seconds": round(measured.wall_seconds, 2),
            "components_seconds": round(end - start, 2),
            # Process start, imports, pipeline compilation and the summary.
            "outside_components_seconds": round(measured.wall_seconds - (end - start), 2),
            "peak_rss_mb": _round(measured.peak_rss_mb), "components": rows,
            "accuracy": summary.metrics.get(ACCURACY), "blessed": summary.blessed,
            "log": measured.log_file}


def _round(x):
    return None if x is None else round(x, 1)


def check(measured: Measured, what: str) -> None:
    # Exit code 3 means "ran but not pushed": the timing still counts.
    if measured.returncode not in (0, 3):
        raise RuntimeError(f"{what} failed with exit code {measured.returncode}; see {measured.log_file}")


def component_table(ours: dict, theirs: dict, metric: str) -> list[str]:
    """Markdown rows: each component's seconds and peak memory on both sides, then the totals and `metric`."""
    lines = ["| component | ours s | ours peak MB | theirs s | theirs peak MB |", "|---|---:|---:|---:|---:|"]
    for n in dict.fromkeys([*ours["components"], *theirs["components"]]):
        o, t = ours["components"].get(n, {}), theirs["components"].get(n, {})
        lines.append(f"| {n} | {md(o.get('seconds'))} | {md(o.get('peak_rss_mb'))} | "
                     f"{md(t.get('seconds'))} | {md(t.get('peak_rss_mb'))} |")
    for who, x in (("ours", ours), ("theirs", theirs)):
        lines.append(f"| *{who}: components / outside them / wall* | "
                     f"{x['components_seconds']:.1f} / {x['outside_components_seconds']:.1f} / "
                     f"{x['wall_seconds']:.1f} | peak {md(x['peak_rss_mb'])} | {metric} {md(x.get(metric))} | |")
    return lines


def md(x) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if isinstance(x, float) and x < 1 else (f"{x:.1f}" if isinstance(x, float) else str(x))
