"""The scale part's plot: each component's seconds and peak memory against rows (bench/results/<date>-scale.png)."""

from __future__ import annotations

from pathlib import Path


def plot_scale(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(result["runs"], key=int)
    rows = [int(n) for n in sizes]
    # The components that took a second or more at the largest size (bench/run.py rated their
    # throughput); the rest are fixed cost at any size.
    largest = result["runs"][sizes[-1]]["components"]
    data_components = [n for n, c in largest.items() if "rows_per_second_per_core" in c]
    fig, (seconds, memory) = plt.subplots(1, 2, figsize=(11, 4))
    for name in data_components:
        points = [(r, result["runs"][n]["components"].get(name, {})) for r, n in zip(rows, sizes)]
        points = [(r, c) for r, c in points if c.get("seconds")]
        if points:
            seconds.plot([r for r, _ in points], [c["seconds"] for _, c in points], marker="o", label=name)
            memory.plot([r for r, _ in points], [c["peak_rss_mb"] for _, c in points], marker="o", label=name)
    seconds.plot(rows, [result["runs"][n]["wall_seconds"] for n in sizes], marker="s", color="black",
                 label="whole run")
    memory.plot(rows, [result["runs"][n]["peak_rss_mb"] for n in sizes], marker="s", color="black",
                label="whole run")
    seconds.set(xscale="log", yscale="log", xlabel="rows", ylabel="seconds", title="time per component")
    memory.set(xscale="log", xlabel="rows", ylabel="peak RSS of the process tree, MB",
               title="memory per component")
    for ax in (seconds, memory):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("The full pipeline on generated penguin-like rows (make bench, scale part)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
