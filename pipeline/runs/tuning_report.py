"""The run report's Tuning section: every trial's values and objective, and the objective per trial with the best
marked (components/tuner/record.py)."""

from __future__ import annotations

from components.tuner import LATEST_TUNING_ID, TUNER_ID
from pipeline.runs import html as page
from pipeline.runs.html import plt
from pipeline.runs.summary import RunSummary


def tuning_section(s: RunSummary) -> str:
    """The section; empty for a run without a tuning step."""
    rec = s.tuning
    if rec is None:
        step = s.component(TUNER_ID) or s.component(LATEST_TUNING_ID)
        if step is None:
            return ""
        return page.section("tuning", "Tuning", f"<p>{page.escape(step.name)} {page.escape(step.state)} and left no "
                            "tuning record.</p>")
    keys = sorted({k for t in rec.trials for k in t.values})
    rows = [("&#9733; best" if t.id == rec.best else "", page.escape(t.id), page.escape(t.state),
             *(page.escape(t.values.get(k, "")) for k in keys),
             "&ndash;" if t.objective is None else f"{t.objective:.4f}",
             "&ndash;" if t.step is None else str(t.step),
             "&ndash;" if t.seconds is None else f"{t.seconds:.1f}", page.escape(t.error[:200]))
            for t in rec.trials]
    table = page.table(("", "trial", "state", *keys, f"eval {rec.metric}", "at step", "seconds", "error"), rows,
                       escaped=False)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    done = [(i, t) for i, t in enumerate(rec.trials) if t.objective is not None]
    ax.plot([i for i, _ in done], [t.objective for _, t in done], "o", color="#2e86c1", label="trial")
    best = next(((i, t) for i, t in done if t.id == rec.best), None)
    if best is not None:
        ax.plot([best[0]], [best[1].objective], "*", markersize=16, color="#1e8449", label=f"best (trial {rec.best})")
    ax.set_xticks(range(len(rec.trials)), [t.id for t in rec.trials])
    ax.set_xlabel("trial")
    ax.set_ylabel(f"eval {rec.metric} ({'higher' if rec.higher_is_better else 'lower'} is better)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    where = ("this run's search" if not rec.reused
             else f"the last search (run {rec.run}), reused by tuning.reuse: latest")
    intro = (f"<p>{page.escape(rec.describe())}.</p><p class=dim>From {page.escape(where)}, "
             f"{page.escape(rec.where)}. The objective is the task's main metric on the eval split at the step the "
             "Trainer would export; the Trainer trained with the best trial's values.</p>")
    return page.section("tuning", "Tuning", intro + page.img(fig, "objective per trial") + table)
