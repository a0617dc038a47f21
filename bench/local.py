"""`make bench` part 1 beyond the ratio to TFX's example: the rerun with nothing
changed, and the same fresh run from an earlier checkout ("before"), both
measured in the same rounds as the ratio so that they share the machine's load.

A rerun counts against the imports it cannot avoid: a fresh process that only
imports the local runner is timed in the same round, and the rerun may take at
most RERUN_TARGET_SECONDS beyond it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.measure import run_measured
from bench.side_by_side import CONFIG_FILE, ENV, check, components, our_command
from pipeline.config import REPO_ROOT, load_config
from pipeline.errors import EXIT_NOTHING_NEW

RERUN_TARGET_SECONDS = 3.0
# Exits as `python -m pipeline` does (pipeline/__main__.py freezes the heap first), so the two differ
# only by what the rerun does.
IMPORTS_ONLY = [sys.executable, "-c", "import gc, pipeline.local.runner; gc.freeze()"]


def before_command(checkout: Path, root: str) -> list[str]:
    """`make run` (caching off) as an earlier checkout has it, with that checkout's venv."""
    return our_command(root, config_file=checkout / "configs" / "local.yaml",
                       python=str(checkout / ".venv" / "bin" / "python"))


def check_before(checkout: Path) -> Path:
    checkout = checkout.resolve()
    for needed in (".venv/bin/python", "configs/local.yaml", "pipeline/__main__.py"):
        if not (checkout / needed).exists():
            raise SystemExit(f"--before {checkout}: no {needed} there; give a checkout of this repository "
                             "with its .venv (e.g. git worktree add /tmp/base <commit>; ln -s $PWD/.venv /tmp/base/)")
    return checkout


def rerun(root: Path, log_prefix: str) -> dict:
    """A first run with caching on under `root`, the same command again, and an imports-only process."""
    from pipeline.dag.pipeline import DRIFT_GATE_ID, SERVING_MODEL_ID  # TF and TFX: only when measuring

    command = our_command(str(root), ["pipeline.enable_cache=true"])
    first = run_measured(command, f"{log_prefix}-first.log", env=ENV, cwd=REPO_ROOT)
    again = run_measured(command, f"{log_prefix}-again.log", env=ENV, cwd=REPO_ROOT)
    imports = run_measured(IMPORTS_ONLY, f"{log_prefix}-imports.log", env=ENV, cwd=REPO_ROOT)
    for measured, what in ((first, "the first cached run"), (imports, "the imports")):
        check(measured, what)
    # A rerun with nothing changed pushes nothing and exits saying so (docs/retraining.md).
    if again.returncode != EXIT_NOTHING_NEW:
        raise RuntimeError(f"the rerun exited with {again.returncode}, not {EXIT_NOTHING_NEW} (nothing new); "
                           f"see {again.log_file}")
    config = load_config(CONFIG_FILE, [f"pipeline.root={root}"])
    rerun_components = components(again, config.pipeline.metadata_path, config.pipeline.name)
    beyond = again.wall_seconds - imports.wall_seconds
    return {"first_wall_seconds": round(first.wall_seconds, 2), "wall_seconds": round(again.wall_seconds, 2),
            "imports_wall_seconds": round(imports.wall_seconds, 2), "beyond_imports_seconds": round(beyond, 2),
            # The model serving now changed with the first run's push: the ServingModel and the DriftGate,
            # which key their cache by the serving version, run again, and so do the Evaluator (its baseline
            # is the ServingModel's copy) and the Pusher (which finds the candidate already serving).
            # Everything else must come from cache.
            "not_cached": sorted(n for n, c in rerun_components["components"].items()
                                 if c["state"] != "cached"
                                 and n not in (SERVING_MODEL_ID, DRIFT_GATE_ID, "Evaluator", "Pusher")),
            "components": rerun_components["components"]}


def summarise_reruns(reruns: list[dict]) -> dict:
    best = min(reruns, key=lambda r: r["beyond_imports_seconds"])
    return {**best, "all_beyond_imports_seconds": [r["beyond_imports_seconds"] for r in reruns],
            "target_seconds": RERUN_TARGET_SECONDS,
            "met": best["beyond_imports_seconds"] <= RERUN_TARGET_SECONDS and not best["not_cached"]}


def before_after(before_runs: list[dict], after: dict, checkout: Path) -> dict:
    best = min(before_runs, key=lambda r: r["wall_seconds"])
    return {"checkout": str(checkout), "before": best, "all_wall_seconds": [r["wall_seconds"] for r in before_runs],
            "wall_ratio": round(after["wall_seconds"] / best["wall_seconds"], 3)}
