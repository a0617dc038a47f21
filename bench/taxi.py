"""`make bench`, part 4: configs/taxi.yaml against TFX's own Chicago taxi pipeline, same rows.

Both read the same CSV (data/taxi) and split it 2:1 by the same hash, so their
eval splits hold the same rows (checked). Each side runs in a fresh process;
the wall times are compared, and each pushed model scores the eval rows
through its serving_default, as a client would, for an exact AUC against the
big_tipper column (TFX's model computes that label itself from tips and fare).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench import scoring, tfx_taxi
from bench.measure import run_measured
from bench.side_by_side import ENV, check, component_table, components, md, our_command
from pipeline.config import REPO_ROOT, load_config, resolve

CONFIG_FILE = REPO_ROOT / "configs" / "taxi.yaml"
TARGET_RATIO = 0.35   # our wall time <= 0.35x theirs
AUC_MARGIN = 0.01     # our eval AUC >= theirs - 0.01
# Columns a client never sends: the label, and what it leaks from (tips).
_UNSENT = ("big_tipper", "tips")


def bench_taxi(work: Path, repeat: int = 1) -> dict:
    """Ours and theirs alternately, `repeat` times each; the fastest of each side counts."""
    config = load_config(CONFIG_FILE)
    data_root = resolve(config.data.input_dir)
    ours_runs, theirs_runs = [], []
    for i in range(repeat):
        ours_root = work / f"taxi-ours-{i}"
        ours = run_measured(our_command(str(ours_root), config_file=CONFIG_FILE), str(work / f"taxi-ours-{i}.log"),
                            env=ENV, cwd=REPO_ROOT)
        check(ours, "our pipeline on configs/taxi.yaml")
        ours_config = load_config(CONFIG_FILE, [f"pipeline.root={ours_root}"])
        ours_runs.append((components(ours, ours_config.pipeline.metadata_path, ours_config.pipeline.name),
                          ours_config))

        theirs_root = work / f"taxi-theirs-{i}"
        theirs = run_measured([sys.executable, "-m", "bench.tfx_taxi", str(theirs_root), data_root],
                              str(work / f"taxi-theirs-{i}.log"), env=ENV, cwd=REPO_ROOT)
        check(theirs, "TFX's taxi example")
        p = tfx_taxi.paths(str(theirs_root))
        theirs_runs.append((components(theirs, p["metadata_path"], tfx_taxi.PIPELINE_NAME), p))
        print(f"  round {i + 1}: ours {ours.wall_seconds:.1f}s, theirs {theirs.wall_seconds:.1f}s", flush=True)
    (best_ours, ours_config) = min(ours_runs, key=lambda r: r[0]["wall_seconds"])
    (best_theirs, theirs_paths) = min(theirs_runs, key=lambda r: r[0]["wall_seconds"])
    aucs = eval_aucs(ours_config, theirs_paths)
    best_ours["auc"], best_theirs["auc"] = aucs["ours"], aucs["theirs"]
    ratio = best_ours["wall_seconds"] / best_theirs["wall_seconds"]
    return {"ours": best_ours, "theirs": best_theirs, "ratio": round(ratio, 3), "eval_rows": aucs["rows"],
            "same_eval_rows": aucs["same_rows"],
            "all_wall_seconds": {"ours": [r["wall_seconds"] for r, _ in ours_runs],
                                 "theirs": [r["wall_seconds"] for r, _ in theirs_runs]},
            "target_ratio": TARGET_RATIO, "auc_margin": AUC_MARGIN,
            "met": ratio <= TARGET_RATIO and aucs["ours"] >= aucs["theirs"] - AUC_MARGIN}


def eval_aucs(ours_config, theirs_paths: dict) -> dict:
    """Both pushed models' exact AUC on our eval split; and whether theirs held the same rows."""
    ours_rows = scoring.examples(ours_config.pipeline.pipeline_root)
    theirs_rows = scoring.examples(theirs_paths["pipeline_root"])
    same = sorted(r.SerializeToString(deterministic=True) for r in ours_rows) == sorted(
        r.SerializeToString(deterministic=True) for r in theirs_rows)
    labels = [scoring.value(r, ours_config.features.label) for r in ours_rows]
    ours = scoring.serve(_latest(ours_config.pipeline.serving_dir), ours_rows, drop=_UNSENT)
    # Their serving signature parses every raw column but tips, big_tipper included (unused).
    theirs = scoring.serve(_latest(theirs_paths["serving_model_dir"]), ours_rows, drop=["tips"])
    return {"ours": round(scoring.auc(labels, ours["probability"]), 4),
            "theirs": round(scoring.auc(labels, theirs[tfx_taxi.OUTPUT_KEY]), 4),
            "rows": len(ours_rows), "same_rows": same}


def _latest(serving_dir: str) -> str:
    versions = sorted(Path(serving_dir).iterdir(), key=lambda p: int(p.name))
    if not versions:
        raise FileNotFoundError(f"nothing was pushed to {serving_dir}")
    return str(versions[-1])


def markdown(t: dict, when: str) -> list[str]:
    o, th = t["ours"], t["theirs"]
    return ["## 4. Chicago taxi: configs/taxi.yaml vs TFX's taxi example", "", when, "",
            f"Wall time (fresh process, imports included): ours {o['wall_seconds']:.1f}s, theirs "
            f"{th['wall_seconds']:.1f}s, **ratio {t['ratio']:.2f}x** (target <= {t['target_ratio']}x); "
            f"fastest of {len(t['all_wall_seconds']['ours'])} rounds, all rounds: {t['all_wall_seconds']}.", "",
            f"Eval AUC, exact, through each pushed model's serving_default on the same {t['eval_rows']} eval rows "
            f"(same rows in both splits: {'yes' if t['same_eval_rows'] else 'NO'}): ours **{md(o['auc'])}**, "
            f"theirs **{md(th['auc'])}** (target: ours >= theirs - {t['auc_margin']}). Both targets: "
            f"{'met' if t['met'] else 'NOT met'}.", "",
            *component_table(o, th, "auc"), ""]
