"""Running our pipeline and a TFX example in fresh processes and reading back what each did:
the parts `make bench`'s comparisons share (bench/run.py: penguins, bench/taxi.py: taxi).

Light to import (no TF/TFX at module level): the TFX examples' own scripts
(bench/tfx_penguin.py, bench/tfx_taxi.py) take their paths from here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

from bench.measure import Measured, run_measured
from pipeline.config import REPO_ROOT, load_config
from pipeline.errors import EXIT_NOT_PUSHED, EXIT_OK

ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "1", "PYTHONPATH": str(REPO_ROOT)}
CONFIG_FILE = REPO_ROOT / "configs" / "local.yaml"
# Below this many rows Beam's worker start-up costs more than it saves.
MULTI_PROCESS_FROM_ROWS = 50_000


def beam_settings(rows: int) -> list[str]:
    """Local Beam overrides for a data size: one in-process worker for small
    data, one worker process per core for large data."""
    if rows < MULTI_PROCESS_FROM_ROWS:
        return ["beam.direct_running_mode=in_memory", "beam.direct_num_workers=1"]
    return ["beam.direct_running_mode=multi_processing", f"beam.direct_num_workers={os.cpu_count() or 1}"]


def our_command(root: str, overrides: list[str] = (), config_file: Path = CONFIG_FILE,
                python: str = sys.executable) -> list[str]:
    """`make run` with caching off (unless an override turns it on) under `root`."""
    sets = [f"pipeline.root={root}", "pipeline.enable_cache=false", *overrides]
    return [python, "-m", "pipeline", "run", "--config", str(config_file),
            *[a for s in sets for a in ("--set", s)]]


def example_paths(root: str, pipeline_name: str) -> dict[str, str]:
    """Where a TFX example pipeline keeps its outputs under `root`: the layout of the examples' own scripts."""
    return {"pipeline_root": os.path.join(root, "pipelines", pipeline_name),
            "metadata_path": os.path.join(root, "metadata", pipeline_name, "metadata.db"),
            "serving_model_dir": os.path.join(root, "serving_model", pipeline_name)}


def measure(command: list[str], log_file: str, what: str, metadata_path: str, pipeline_name: str,
            env: dict = ENV, cwd: Path = REPO_ROOT) -> dict:
    """`command` in a fresh process, watched (bench/measure.py); then what it recorded, by `components`."""
    measured = run_measured(command, log_file, env=env, cwd=cwd)
    check(measured, what)
    return components(measured, metadata_path, pipeline_name)


def measure_ours(root: Path, log_file: str, what: str, overrides: list[str] = (),
                 config_file: Path = CONFIG_FILE) -> dict:
    """Our pipeline (`our_command`) under `root`, measured."""
    config = load_config(config_file, [f"pipeline.root={root}"])
    return measure(our_command(str(root), overrides, config_file), log_file, what,
                   config.pipeline.metadata_path, config.pipeline.name)


def measure_example(script: ModuleType, root: str, data_root: str, log_file: str, what: str) -> dict:
    """A TFX example run by its script (bench/tfx_penguin.py, bench/tfx_taxi.py) under `root`, measured."""
    return measure([sys.executable, "-m", script.__name__, root, data_root], log_file, what,
                   example_paths(root, script.PIPELINE_NAME)["metadata_path"], script.PIPELINE_NAME)


def fastest(ours_runs: list[dict], theirs_runs: list[dict], target_ratio: float) -> dict:
    """The fastest run of each side (the fairest figure on a machine shared with other work) and their ratio."""
    best_ours = min(ours_runs, key=lambda r: r["wall_seconds"])
    best_theirs = min(theirs_runs, key=lambda r: r["wall_seconds"])
    ratio = best_ours["wall_seconds"] / best_theirs["wall_seconds"]
    return {"ours": best_ours, "theirs": best_theirs, "ratio": round(ratio, 3),
            "all_wall_seconds": {"ours": [r["wall_seconds"] for r in ours_runs],
                                 "theirs": [r["wall_seconds"] for r in theirs_runs]},
            "target_ratio": target_ratio, "met": ratio <= target_ratio}


def components(measured: Measured, metadata_path: str, pipeline_name: str) -> dict:
    """Per-component times from MLMD, each with the process tree's peak memory while it ran."""
    from pipeline.runs.summary import ACCURACY, summarize  # TFMA: not for the examples' own processes

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
    # "Ran but not pushed": the timing still counts.
    if measured.returncode not in (EXIT_OK, EXIT_NOT_PUSHED):
        raise RuntimeError(f"{what} failed with exit code {measured.returncode}; see {measured.log_file}")
