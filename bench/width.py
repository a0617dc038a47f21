"""`make bench`'s width sweep: generated tables of N numeric columns through the full pipeline, each component's
seconds and the run's peak memory beside penguins' in the same run, with a plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from bench.side_by_side import CONFIG_FILE, measure_ours

ROWS = 1_000
MISSING = 0.05  # share of empty cells
# The bar for wide tables, at TARGET_WIDTH columns: Transform within 2x penguins', the run's peak within 1.5x.
TARGET_WIDTH = 200
TRANSFORM_TARGET = 2.0
PEAK_TARGET = 1.5


def write_table(directory: Path, columns: int, rows: int = ROWS, seed: int = 0) -> Path:
    """x0..x{columns-1}: floats of differing scales with MISSING of the cells empty; y: 0/1 from a few of them."""
    rng = np.random.default_rng(seed)
    values = rng.normal(rng.uniform(-50, 50, columns), rng.uniform(0.1, 20, columns), (rows, columns))
    label = (((values[:, : min(columns, 5)] - values[:, : min(columns, 5)].mean(axis=0)).sum(axis=1)
              + rng.normal(0, 5, rows)) > 0).astype(int)
    text = np.char.mod("%.3f", values)
    text[rng.random((rows, columns)) < MISSING] = ""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "data.csv"
    lines = [",".join([*(f"x{i}" for i in range(columns)), "y"])]
    lines += [",".join([*row, str(y)]) for row, y in zip(text, label)]
    path.write_text("\n".join(lines) + "\n")
    return path


def config_file(path: Path, data: Path, columns: int) -> Path:
    """The shipped local config (Beam, trainer, evaluator) on the wide table: every column inferred numeric."""
    base = yaml.safe_load(CONFIG_FILE.read_text())
    base.update(pipeline={"name": f"width-{columns}"}, data={"input_dir": str(data), "schema_file": None},
                features={"label": "y", "task": "binary"}, evaluator={"lower_bound": 0.5, "max_regression": 1.0})
    path.write_text(yaml.safe_dump(base))
    return path


def bench_width(work: Path, widths: list[int], repeat: int = 1) -> dict:
    """Penguins and each width `repeat` times, round after round (so a slow spell of the machine hits every
    table alike); each keeps its fastest round by wall time, as part 1 does."""
    configs = {}
    for n in widths:
        data = work / f"width-data-{n}"
        write_table(data, n, seed=n)
        configs[str(n)] = config_file(work / f"width-{n}.yaml", data, n)
    rounds: dict = {"penguins": [], **{n: [] for n in configs}}
    for r in range(repeat):
        print(f"width: round {r + 1} of {repeat}: penguins first, as the same-run baseline ...", flush=True)
        rounds["penguins"].append(measure_ours(work / f"width-penguins-{r}", str(work / f"width-penguins-{r}.log"),
                                               "penguins (width baseline)"))
        for n, config in configs.items():
            print(f"width: {n} numeric columns x {ROWS} rows ...", flush=True)
            rounds[n].append(measure_ours(work / f"width-{n}-{r}", str(work / f"width-{n}-{r}.log"),
                                          f"the {n}-column run", config_file=config))
    penguins = _fastest(rounds["penguins"])
    runs = {}
    for n in configs:
        r = _fastest(rounds[n])
        runs[n] = {**r, "ratios": ratios(r, penguins)}
        print(f"  {n} columns: {r['wall_seconds']:.0f}s, Transform {_seconds(r, 'Transform')}s "
              f"({runs[n]['ratios']['Transform']}x penguins'), peak {r['peak_rss_mb']:.0f} MB "
              f"({runs[n]['ratios']['peak_rss']}x)", flush=True)
    result = {"rows": ROWS, "repeat": repeat, "penguins": penguins, "runs": runs}
    target = runs.get(str(TARGET_WIDTH))
    if target:
        result["target"] = {"columns": TARGET_WIDTH, "transform": TRANSFORM_TARGET, "peak": PEAK_TARGET,
                            "met": (target["ratios"]["Transform"] <= TRANSFORM_TARGET
                                    and target["ratios"]["peak_rss"] <= PEAK_TARGET)}
    return result


def _fastest(runs: list[dict]) -> dict:
    """The round with the least wall time, with every round's Transform seconds beside it."""
    best = min(runs, key=lambda r: r["wall_seconds"])
    return {**best, "transform_rounds": [_seconds(r, "Transform") for r in runs]}


def ratios(run: dict, baseline: dict) -> dict:
    """Each component's seconds and the run's peak memory over penguins' in the same bench run."""
    out = {}
    for name, c in run["components"].items():
        before = baseline["components"].get(name, {}).get("seconds")
        if before and c.get("seconds") is not None:
            out[name] = round(c["seconds"] / before, 2)
    out["wall"] = round(run["wall_seconds"] / baseline["wall_seconds"], 2)
    out["peak_rss"] = round(run["peak_rss_mb"] / baseline["peak_rss_mb"], 2)
    return out


def _seconds(run: dict, component: str):
    return run["components"].get(component, {}).get("seconds")


def markdown(w: dict) -> list[str]:
    widths = sorted(w["runs"], key=int)
    p = w["penguins"]
    lines = [f"## 9. Width: {w['rows']} rows of N numeric columns, beside penguins in the same run", "",
             "| component | penguins s | " + " | ".join(f"{n} cols s (x penguins)" for n in widths) + " |",
             "|---|---:|" + "---:|" * len(widths)]
    names = list(dict.fromkeys([*p["components"], *(c for n in widths for c in w["runs"][n]["components"])]))
    for name in names:
        cells = [f"{_md(_seconds(w['runs'][n], name))} ({_md(w['runs'][n]['ratios'].get(name))})" for n in widths]
        lines.append(f"| {name} | {_md(_seconds(p, name))} | " + " | ".join(cells) + " |")
    lines.append(f"| *wall* | {p['wall_seconds']:.1f} | " + " | ".join(
        f"{w['runs'][n]['wall_seconds']:.1f} ({w['runs'][n]['ratios']['wall']})" for n in widths) + " |")
    lines.append(f"| *peak RSS MB* | {p['peak_rss_mb']:.0f} | " + " | ".join(
        f"{w['runs'][n]['peak_rss_mb']:.0f} ({w['runs'][n]['ratios']['peak_rss']})" for n in widths) + " |")
    lines.append(f"| *Transform, every round* | {_rounds(p)} | " + " | ".join(_rounds(w["runs"][n]) for n in widths)
                 + " |")
    lines += ["", f"Each table ran {w.get('repeat', 1)} time(s), round after round; the fastest round by wall time "
                  "is shown.", ""]
    t = w.get("target")
    if t:
        lines += [f"Done-when at {t['columns']} columns: Transform <= {t['transform']}x penguins', peak <= "
                  f"{t['peak']}x: {'met' if t['met'] else 'NOT met'}.", ""]
    return lines + ["Plot: `<date>-width.png` beside this file.", ""]


def _rounds(run: dict) -> str:
    return ", ".join(str(_md(x)) for x in run.get("transform_rounds", [_seconds(run, "Transform")]))


def _md(x):
    return "–" if x is None else x


def plot_width(w: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = sorted(w["runs"], key=int)
    cols = [int(n) for n in widths]
    fig, (seconds, memory) = plt.subplots(1, 2, figsize=(11, 4))
    for name in ("Transform", "Trainer", "Evaluator", "StatisticsGen"):
        points = [(c, _seconds(w["runs"][n], name)) for c, n in zip(cols, widths)]
        points = [(c, s) for c, s in points if s is not None]
        if points:
            line, = seconds.plot(*zip(*points), marker="o", label=name)
            base = _seconds(w["penguins"], name)
            if base:
                seconds.axhline(base, ls="--", color=line.get_color(), alpha=0.6)
    seconds.plot(cols, [w["runs"][n]["wall_seconds"] for n in widths], marker="s", color="black", label="whole run")
    seconds.axhline(w["penguins"]["wall_seconds"], ls="--", color="black", alpha=0.6)
    memory.plot(cols, [w["runs"][n]["peak_rss_mb"] for n in widths], marker="s", color="black", label="peak RSS")
    memory.axhline(w["penguins"]["peak_rss_mb"], ls="--", color="black", alpha=0.6, label="penguins")
    seconds.set(xscale="log", xlabel="numeric columns", ylabel="seconds",
                title="time per component (dashed: penguins)")
    memory.set(xscale="log", xlabel="numeric columns", ylabel="peak RSS of the process tree, MB",
               title="the run's peak memory")
    for ax in (seconds, memory):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"Width sweep: {w['rows']} rows (make bench, width part)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
