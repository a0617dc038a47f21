"""The results of `make bench` (the merged JSON of a day) as bench/results/<date>.md."""

from __future__ import annotations

import json


def markdown(r: dict) -> str:
    lines = [f"# Benchmarks {r.get('date', '')}", ""]
    m = r.get("machine", {})
    lines += [f"Machine: {m.get('cpus')} CPUs, {m.get('memory_gb')} GB, shared with other work. Each part "
              "says when it ran and the load average (1, 5, 15 min) at its start and end.", ""]
    for key, part in (("local", _local), ("trainer", _trainer), ("scale", _scale), ("taxi", _taxi),
                      ("analyzer_cache", _analyzer_cache), ("input", _input),
                      ("example_gen", _example_gen), ("predict", _predict), ("width", _width),
                      ("quality", _quality)):
        if key in r:
            lines += part(r[key])
    return "\n".join(lines)


def _local(loc: dict) -> list[str]:
    lines = ["## 1. Local end to end: this pipeline vs TFX's penguin example", "", _when(loc), "",
             f"Wall time (fresh process, imports included): ours {loc['ours']['wall_seconds']:.1f}s, "
             f"theirs {loc['theirs']['wall_seconds']:.1f}s, **ratio {loc['ratio']:.2f}x** "
             f"(target <= {loc['target_ratio']}x: {'met' if loc['met'] else 'NOT met'}); fastest of "
             f"{len(loc.get('all_wall_seconds', {}).get('ours', [0]))} rounds, all rounds: "
             f"{loc.get('all_wall_seconds')}.", "",
             *_component_table(loc["ours"], loc["theirs"], "accuracy"), ""]
    return lines + _rerun_and_before(loc)


def _component_table(ours: dict, theirs: dict, metric: str) -> list[str]:
    """Markdown rows: each component's seconds and peak memory on both sides, then the totals and `metric`."""
    lines = ["| component | ours s | ours peak MB | theirs s | theirs peak MB |", "|---|---:|---:|---:|---:|"]
    for n in dict.fromkeys([*ours["components"], *theirs["components"]]):
        o, t = ours["components"].get(n, {}), theirs["components"].get(n, {})
        lines.append(f"| {n} | {_md(o.get('seconds'))} | {_md(o.get('peak_rss_mb'))} | "
                     f"{_md(t.get('seconds'))} | {_md(t.get('peak_rss_mb'))} |")
    for who, x in (("ours", ours), ("theirs", theirs)):
        lines.append(f"| *{who}: components / outside them / wall* | "
                     f"{x['components_seconds']:.1f} / {x['outside_components_seconds']:.1f} / "
                     f"{x['wall_seconds']:.1f} | peak {_md(x['peak_rss_mb'])} | {metric} {_md(x.get(metric))} | |")
    return lines


def _md(x) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if isinstance(x, float) and x < 1 else (f"{x:.1f}" if isinstance(x, float) else str(x))


def _rerun_and_before(loc: dict) -> list[str]:
    """Part 1's no-change rerun and before/after table (bench/local.py measures them)."""
    lines = []
    if "rerun" in loc:
        r = loc["rerun"]
        lines += [f"No-change rerun (caching on, a second identical `make run`): {r['wall_seconds']:.1f}s wall; "
                  f"a process that only imports the local runner took {r['imports_wall_seconds']:.1f}s in the same "
                  f"round, so **{r['beyond_imports_seconds']:.1f}s beyond the imports** (target <= "
                  f"{r['target_seconds']:.0f}s: {'met' if r['met'] else 'NOT met'}); components not served from "
                  f"cache, besides the four that look at the model the first run pushed (the ServingModel and "
                  f"the DriftGate) or judge the candidate against it (the Evaluator and the Pusher): "
                  f"{', '.join(r['not_cached']) or 'none'}. "
                  f"All rounds: {r['all_beyond_imports_seconds']}.",
                  ""]
    if "before_after" in loc:
        ba = loc["before_after"]
        before, after = ba["before"], loc["ours"]
        lines += [f"Before/after: the same fresh run from `{ba['checkout']}` in the same rounds (fastest of "
                  f"{ba['all_wall_seconds']}): **after/before {ba['wall_ratio']:.2f}x wall**; before/theirs was "
                  f"{before['wall_seconds'] / loc['theirs']['wall_seconds']:.2f}x.", "",
                  "| component | before s | after s |", "|---|---:|---:|"]
        names = list(dict.fromkeys([*before["components"], *after["components"]]))
        for n in names:
            b, a = before["components"].get(n, {}), after["components"].get(n, {})
            lines.append(f"| {n} | {_secs(b.get('seconds'))} | {_secs(a.get('seconds'))} |")
        for label, key in (("components", "components_seconds"), ("outside them (imports, set-up)",
                                                                  "outside_components_seconds"),
                           ("wall", "wall_seconds")):
            lines.append(f"| *{label}* | {before[key]:.1f} | {after[key]:.1f} |")
        lines.append("")
    return lines


def _secs(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def _trainer(t: dict) -> list[str]:
    return _text_part("## 2. Trainer throughput vs model.fit", t)


def _text_part(title: str, t: dict) -> list[str]:
    """A part whose own report text says it all (or why it was not measured)."""
    lines = [title, "", _when(t), ""]
    if "skipped" in t or "failed" in t:
        lines += [f"Not measured: {t.get('skipped') or t.get('failed')}.", ""]
    else:
        lines += ["```", t.get("text") or json.dumps(t, indent=2), "```", ""]
    return lines


def _scale(s: dict) -> list[str]:
    sizes = sorted(s["runs"], key=int)
    lines = ["## 3. Scale: generated data through the full pipeline", "", _when(s), "",
             "| component | " + " | ".join(f"{n} rows s (peak MB)" for n in sizes)
             + (" | growth |" if "growth" in s else " |"),
             "|---|" + "---:|" * (len(sizes) + ("growth" in s))]
    names = list(dict.fromkeys(n for size in sizes for n in s["runs"][size]["components"]))
    for n in names:
        cells = []
        for size in sizes:
            c = s["runs"][size]["components"].get(n, {})
            cells.append(f"{_md(c.get('seconds'))} ({_md(c.get('peak_rss_mb'))})")
        growth = f" | {_md(s.get('growth', {}).get(n))}" if "growth" in s else ""
        lines.append(f"| {n} | " + " | ".join(cells) + growth + " |")
    lines.append("| *wall (process)* | " + " | ".join(
        f"{s['runs'][size]['wall_seconds']:.1f} ({_md(s['runs'][size]['peak_rss_mb'])})" for size in sizes)
        + (f" | {s['total_growth']} |" if "growth" in s else " |"))
    lines.append("")
    if all("rows_per_second_per_core" in s["runs"][size] for size in sizes):
        lines += ["Rows per second per core (components taking 1 s or more):", "",
                  "| component | " + " | ".join(f"{n} rows" for n in sizes) + " |",
                  "|---|" + "---:|" * len(sizes)]
        for n in names:
            cells = [_md(s["runs"][size]["components"].get(n, {}).get("rows_per_second_per_core"))
                     for size in sizes]
            if any(c != "–" for c in cells):
                lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines += ["| *whole run* | " + " | ".join(str(s["runs"][size]["rows_per_second_per_core"])
                                                  for size in sizes) + " |", "",
                  "Plot: `<date>-scale.png` beside this file.", ""]
    lines.append("Beam: " + "; ".join(f"{size} rows: {' '.join(s['runs'][size]['beam'])}" for size in sizes))
    if "growth" in s:
        lines.append(f"Rows grew {s['row_ratio']:.0f}x. Components growing faster than the rows: "
                     f"{', '.join(s['superlinear']) or 'none'}.")
    if "peak_growth" in s:
        p = s["peak_growth"]
        lines.append(f"Peak RSS at {p['rows'][1]} rows is **{p['ratio']}x** that at {p['rows'][0]} rows "
                     f"(target <= {p['target']}x: {'met' if p['met'] else 'NOT met'}).")
    largest = max(sizes, key=int)
    lines.append(f"Largest ({largest} rows) took {s['runs'][largest]['wall_seconds'] / 60:.1f} min "
                 f"(target <= {s['target_seconds'] / 60:.0f} min: "
                 f"{'met' if s['largest_within_target'] else 'NOT met'}).")
    lines.append("")
    return lines


def _example_gen(e: dict) -> list[str]:
    lines = ["## 7. ExampleGen alone: ours vs TFX's CsvExampleGen on the same files", "", _when(e), "",
             "Each in a fresh process (imports included), the pipeline's local Beam settings for the size; "
             f"rows/s/core over {e['cpus']} cores. Plot: `<date>-example-gen.png` beside this file.", "",
             "| rows | ours s (peak MB) | ours rows/s/core | TFX s (peak MB) | TFX rows/s/core | ratio |",
             "|---:|---:|---:|---:|---:|---:|"]
    for n in sorted(e["runs"], key=int):
        r = e["runs"][n]
        cells = []
        for side in ("ours", "tfx"):
            x = r[side]
            cells += ([f"{x['wall_seconds']:.1f} ({x['peak_rss_mb']})", str(x["rows_per_second_per_core"])]
                      if "wall_seconds" in x else [x.get("skipped", "-"), "-"])
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {_md(r.get('ratio'))} |")
    return lines + [""]


def _width(w: dict) -> list[str]:
    from bench.width import markdown as width_markdown

    return [*width_markdown(w)[:1], "", _when(w), *width_markdown(w)[1:]]


def _quality(q: dict) -> list[str]:
    from bench.quality_report import markdown as quality_markdown

    return quality_markdown(q, when=_when(q))


def _predict(p: dict) -> list[str]:
    lines = ["## 8. Batch prediction: `python -m pipeline predict` vs TFX's BulkInferrer, same rows and model", "",
             _when(p), "",
             f"Model version {p['model_version']}; each side in a fresh process (imports included), the pipeline's "
             "local Beam settings for the size. TFX's side scores Examples our ExampleGen wrote first (its own "
             "seconds in brackets, not counted) through a copy of the model without its string output, which "
             "tfx-bsl 1.16 cannot log (bench/predict_bench.py).", "",
             "| rows | ours s (peak MB) | ours rows/s | ours in-job rows/s | BulkInferrer s (peak MB) "
             "| BulkInferrer rows/s | ours / BulkInferrer rows/s |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sorted(p["runs"], key=int):
        r = p["runs"][n]
        o, t = r["ours"], r["tfx"]
        theirs = ([f"{t['wall_seconds']:.1f} ({t['peak_rss_mb']}) [+{t['example_gen_seconds']:.1f}]",
                   f"{t['rows_per_second']:,}"] if "wall_seconds" in t else [t.get("skipped", "-"), "-"])
        lines.append(f"| {int(n):,} | {o['wall_seconds']:.1f} ({o['peak_rss_mb']}) | {o['rows_per_second']:,} | "
                     f"{o['job_rows_per_second']:,} | " + " | ".join(theirs) + f" | {_md(r.get('speedup'))} |")
    if "peak_growth" in p:
        lines += ["", f"Peak memory at the largest size: {p['peak_growth']}x the next size down's "
                      f"(target <= {p['peak_growth_target']}x)."]
    return lines + [""]


def _taxi(t: dict) -> list[str]:
    o, th = t["ours"], t["theirs"]
    return ["## 4. Chicago taxi: configs/taxi.yaml vs TFX's taxi example", "", _when(t), "",
            f"Wall time (fresh process, imports included): ours {o['wall_seconds']:.1f}s, theirs "
            f"{th['wall_seconds']:.1f}s, **ratio {t['ratio']:.2f}x** (target <= {t['target_ratio']}x); "
            f"fastest of {len(t['all_wall_seconds']['ours'])} rounds, all rounds: {t['all_wall_seconds']}.", "",
            f"Held-out AUC, exact, through each pushed model's serving_default on the same {t['eval_rows']} rows, "
            f"our test split (all in their eval split: {'yes' if t['same_eval_rows'] else 'NO'}): "
            f"ours **{_md(o['auc'])}**, "
            f"theirs **{_md(th['auc'])}** (target: ours >= theirs - {t['auc_margin']}). Both targets: "
            f"{'met' if t['met'] else 'NOT met'}.", "",
            *_component_table(o, th, "auc"), ""]


def _analyzer_cache(a: dict) -> list[str]:
    lines = ["## 5. Analyzer cache: the next run of a rolling window, with vs without", "", _when(a), "",
             f"window({a['window']}) of {a['rows_per_span']}-row spans; {' '.join(a['beam'])}. Each side ran on "
             f"spans 1-{a['window']}, then on spans 2-{a['window'] + 1}; the second runs compared:", "",
             "| | with the cache | without | ratio |", "|---|---:|---:|---:|"]
    c, n = a["next"]["cache"], a["next"]["no_cache"]
    for name in ("CsvExampleGen", "Transform"):
        cs, ns = c["components"][name]["seconds"], n["components"][name]["seconds"]
        lines.append(f"| {name} s | {cs:.1f} | {ns:.1f} | {cs / ns:.2f}x |")
    first = {side: a["first"][side]["components"]["Transform"]["seconds"] for side in ("cache", "no_cache")}
    lines += [f"| whole run s | {c['wall_seconds']:.1f} | {n['wall_seconds']:.1f} | {a['wall_ratio']:.2f}x |", "",
              f"Spans analyzed with the cache: [{c['analyzed_spans']}], from the cache: [{c['cached_spans']}]. "
              f"First runs (filling the cache): Transform {first['cache']:.1f}s with, {first['no_cache']:.1f}s "
              "without.", ""]
    return lines


def _input(i: dict) -> list[str]:
    return _text_part("## 6. Trainer input: without and with the tf.data fixes, and the input-bound check", i)


def _when(part: dict) -> str:
    if "measured_at" not in part:
        return "(run time and load not recorded)"
    load = part["load_average"]
    return f"Measured {part['measured_at']}; load average {load['start']} at the start, {load['end']} at the end."
