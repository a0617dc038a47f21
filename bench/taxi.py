"""`make bench`, part 4: configs/taxi.yaml against TFX's own Chicago taxi pipeline, same rows.

Both read the same CSV (data/taxi) and split it by the same hash: theirs 2:1 into train and eval, ours 4:1:1
into train, eval and test, so both train on the same 2/3 share and our test rows (hash % 6 == 5) are among
their eval rows (hash % 3 == 2): rows neither model saw (checked). Each side runs in a fresh process; the
wall times are compared, and each pushed model scores our test rows through its serving_default, as a
client would, for an exact AUC against the big_tipper column (TFX's model computes that label itself from
tips and fare).
"""

from __future__ import annotations

from pathlib import Path

from bench import scoring, tfx_taxi
from bench.side_by_side import example_paths, fastest, measure_example, measure_ours
from components.serving.serving_dir import serving
from components.splits import EVAL, TEST
from pipeline.config import REPO_ROOT, load_config, resolve

CONFIG_FILE = REPO_ROOT / "configs" / "taxi.yaml"
TARGET_RATIO = 0.35   # our wall time <= 0.35x theirs
AUC_MARGIN = 0.01     # our held-out AUC >= theirs - 0.01
# Columns a client never sends: the label, and what it leaks from (tips).
_UNSENT = ("big_tipper", "tips")


def bench_taxi(work: Path, repeat: int = 1) -> dict:
    """Ours and theirs alternately, `repeat` times each; the fastest of each side counts."""
    data_root = resolve(load_config(CONFIG_FILE).data.input_dir)
    ours_runs, theirs_runs = [], []
    for i in range(repeat):
        ours_runs.append(measure_ours(work / f"taxi-ours-{i}", str(work / f"taxi-ours-{i}.log"),
                                      "our pipeline on configs/taxi.yaml", config_file=CONFIG_FILE))
        theirs_runs.append(measure_example(tfx_taxi, str(work / f"taxi-theirs-{i}"), data_root,
                                           str(work / f"taxi-theirs-{i}.log"), "TFX's taxi example"))
        print(f"  round {i + 1}: ours {ours_runs[-1]['wall_seconds']:.1f}s, "
              f"theirs {theirs_runs[-1]['wall_seconds']:.1f}s", flush=True)
    result = fastest(ours_runs, theirs_runs, TARGET_RATIO)
    # The pushed models of the fastest rounds score the held-out rows.
    ours_root = work / f"taxi-ours-{ours_runs.index(result['ours'])}"
    theirs_root = work / f"taxi-theirs-{theirs_runs.index(result['theirs'])}"
    aucs = eval_aucs(load_config(CONFIG_FILE, [f"pipeline.root={ours_root}"]),
                     example_paths(str(theirs_root), tfx_taxi.PIPELINE_NAME))
    result["ours"]["auc"], result["theirs"]["auc"] = aucs["ours"], aucs["theirs"]
    return {"ours": result["ours"], "theirs": result["theirs"], "ratio": result["ratio"], "eval_rows": aucs["rows"],
            "same_eval_rows": aucs["same_rows"], "all_wall_seconds": result["all_wall_seconds"],
            "target_ratio": TARGET_RATIO, "auc_margin": AUC_MARGIN,
            "met": result["met"] and aucs["ours"] >= aucs["theirs"] - AUC_MARGIN}


def eval_aucs(ours_config, theirs_paths: dict) -> dict:
    """Both pushed models' exact AUC on our test split; and whether those rows are all in their eval split."""
    ours_rows = scoring.examples(ours_config.pipeline.pipeline_root, TEST)
    theirs_rows = scoring.examples(theirs_paths["pipeline_root"], EVAL)
    same = {r.SerializeToString(deterministic=True) for r in ours_rows} <= {
        r.SerializeToString(deterministic=True) for r in theirs_rows}
    labels = [scoring.value(r, ours_config.features.label) for r in ours_rows]
    ours = scoring.serve(_latest(ours_config.pipeline.serving_dir), ours_rows, drop=_UNSENT)
    # Their serving signature parses every raw column but tips, big_tipper included (unused).
    theirs = scoring.serve(_latest(theirs_paths["serving_model_dir"]), ours_rows, drop=["tips"])
    return {"ours": round(scoring.auc(labels, ours["probability"]), 4),
            "theirs": round(scoring.auc(labels, theirs[tfx_taxi.OUTPUT_KEY]), 4),
            "rows": len(ours_rows), "same_rows": same}


def _latest(serving_dir: str) -> str:
    version = serving(serving_dir)
    if version is None:
        raise FileNotFoundError(f"nothing was pushed to {serving_dir}")
    return version.path
