"""The quality part's results as markdown (bench/results/<date>.md, quality.md) and a plot: per table, our pushed
model on the scale from the linear model (0) to the GBM (1), and the run's time against penguins'."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

TARGET_GAP = 0.5  # issue 45: on average at least half of the gap from the linear model to the GBM
_SHOWN_COMPONENTS = ("ExampleGen", "StatisticsGen", "Transform", "Trainer", "Evaluator")


def _value(x: Optional[float], metric: str) -> str:
    if x is None:
        return "–"
    return f"{x:,.1f}" if metric == "rmse" and abs(x) >= 100 else f"{x:.3f}"


def _ours(r: dict) -> str:
    if r["ours"] is None:
        return "not pushed" if r["blessed"] is not False else "not pushed (not blessed)"
    return _value(r["ours"], r["metric"])


def one_line(r: dict) -> str:
    gap = "–" if r["gap_closed"] is None else f"{r['gap_closed']:.2f}"
    ratio = f" ({r['x_penguins']}x penguins)" if r.get("x_penguins") else ""
    return (f"{r['metric']}: ours {_ours(r)}, linear {_value(r['linear'], r['metric'])}, GBM "
            f"{_value(r['gbm'], r['metric'])}; gap closed {gap}; beats linear {'yes' if r['beats_linear'] else 'NO'}; "
            f"run {r['wall_seconds']:.1f} s{ratio}")


def _components(r: dict) -> str:
    seconds = []
    for shown in _SHOWN_COMPONENTS:
        found = [s for name, s in r["components"].items() if name.endswith(shown) and s is not None]
        seconds.append(f"{sum(found):.0f}" if found else "–")
    return " / ".join(seconds)


def markdown(q: dict, title: str = "## 10. Quality: the model pushed by config alone vs a linear model and a GBM",
             when: str = "") -> list[str]:
    p = q["penguins"]
    lines = [title, ""] + ([when, ""] if when else [])
    lines += [f"Held out: {q['heldout']}. Our pipeline gets the other rows (`python -m pipeline run`, a fresh process "
              "per table, a config with only the label, task, positive class and features.ignore); its pushed "
              "version scores the held-out rows through serving_default (`pipeline predict`'s code). The linear "
              "model and HistGradientBoosting (GBM) are fit on all the pipeline's rows. Gap closed = (ours - linear) "
              "/ (GBM - linear), on AUC, accuracy or RMSE: 1 is as good as the GBM. Times against penguins' "
              f"`make run`, {_secs(p['wall_seconds'])} s, measured {p['measured']}. Overrides: "
              f"{' '.join(q['overrides']) or 'none (the defaults)'}.", "",
              "| table | task: metric | rows (held out) | ours | linear | GBM | gap closed | beats linear | "
              "run s (x penguins) | " + " / ".join(_SHOWN_COMPONENTS) + " s |",
              "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for name, r in q["tables"].items():
        gap = "–" if r["gap_closed"] is None else f"**{r['gap_closed']:.2f}**"
        ratio = f" ({r['x_penguins']}x)" if r.get("x_penguins") else ""
        lines.append(f"| {name} | {r['task']}: {r['metric']} | {r['rows']:,} ({r['heldout_rows']:,}) | {_ours(r)} | "
                     f"{_value(r['linear'], r['metric'])} | {_value(r['gbm'], r['metric'])} | {gap} | "
                     f"{'yes' if r['beats_linear'] else 'NO'} | {r['wall_seconds']:.1f}{ratio} | {_components(r)} |")
    mean = q["mean_gap_closed"]
    lines += ["", f"Mean gap closed over {q['gaps_counted']} of {len(q['tables'])} tables: "
                  + ("–" if mean is None else f"**{mean:.2f}**")
              + f" (target >= {q['target_gap']}: {'met' if q['gap_target_met'] else 'NOT met'}); "
              f"every table beats the linear model: {'yes' if q['all_beat_linear'] else 'NO'}.", "",
              "What each run's summary said (so verdicts can be checked against the figures above):", ""]
    for name, r in q["tables"].items():
        rejected = f"; predict rejected {r['rejected']} held-out rows" if r.get("rejected") else ""
        lines.append(f"- **{name}**{rejected}:")
        lines += [f"  - `{line.strip()}`" for line in r["said"]] or ["  - (no summary in the log)"]
    return lines + ["", "Plot: `<date>-quality.png` beside this file.", ""]


def _secs(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.1f}"


def plot(q: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(q["tables"])
    rows = [q["tables"][n] for n in names]
    fig, (gaps, times) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    values = [r["gap_closed"] if r["gap_closed"] is not None else 0.0 for r in rows]
    bars = gaps.bar(names, values, color=["tab:green" if r["beats_linear"] else "tab:red" for r in rows])
    for bar, r in zip(bars, rows):
        text = (f"{r['metric']}\nours {_ours(r)}\nlinear {_value(r['linear'], r['metric'])}\n"
                f"GBM {_value(r['gbm'], r['metric'])}")
        gaps.annotate(text, (bar.get_x() + bar.get_width() / 2, max(bar.get_height(), 0)), ha="center",
                      va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    gaps.axhline(0, color="black", lw=1, label="linear model (0)")
    gaps.axhline(1, color="tab:blue", lw=1, ls="--", label="GBM (1)")
    gaps.axhline(TARGET_GAP, color="gray", lw=1, ls=":", label=f"target mean ({TARGET_GAP})")
    low = min([0.0, *values]) - 0.1
    gaps.set(ylim=(low, max(1.6, max(values) + 0.6)), ylabel="gap closed: (ours - linear) / (GBM - linear)",
             title=f"held-out quality, mean gap closed {q['mean_gap_closed']}")
    gaps.legend(fontsize="small", loc="upper right")
    ratios = [r.get("x_penguins") or 0.0 for r in rows]
    times.bar(names, ratios, color="tab:gray")
    times.axhline(1, color="black", lw=1, ls="--")
    times.set(ylabel="run wall time / penguins' make run", title="time of each run (1 = penguins)")
    for ax in (gaps, times):
        ax.tick_params(axis="x", labelrotation=20)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("make bench, quality part: the model pushed by config alone (red: not better than linear)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
