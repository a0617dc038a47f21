"""`make bench`, part 5: a rolling window's next run with Transform's analyzer cache vs without it.

Four generated spans of `rows` rows each; `data.spans=window(3)`. Each side
first runs on spans 1-3 (the cache side fills its cache), then span 4 lands
and each side runs again on spans 2-4: the cache side analyzes span 4 only,
the other analyzes all three (and uses TFX's CsvExampleGen, as without the
cache). The two second runs are what is compared: Transform's time, the
ExampleGen's (the cache side writes each span in its own files), and the
whole run's.
"""

from __future__ import annotations

from pathlib import Path

from bench.data_generator import write_dataset
from bench.side_by_side import CONFIG_FILE, measure_ours
from components.data.snapshot.spans import DEFAULT_READY_MARKER
from pipeline.config import load_config

WINDOW = 3
SIDES = {"cache": ["data.analyzer_cache=true"], "no_cache": ["data.analyzer_cache=false"]}


def _write_span(directory: Path, rows: int, seed: int) -> None:
    write_dataset(directory, rows, seed=seed)
    (directory / DEFAULT_READY_MARKER).write_bytes(b"")  # complete: data.span_ready_marker's default


def bench_analyzer_cache(work: Path, rows: int, beam: list[str]) -> dict:
    source = work / "cache-spans"
    for span in range(1, WINDOW + 1):
        _write_span(source / f"span-{span}", rows, seed=span)
    common = [f"data.input_dir={source}", f"data.spans=window({WINDOW})", "drift_gate.enabled=false", *beam]
    first = {side: _run(work, side, "first", [*common, *extra]) for side, extra in SIDES.items()}
    _write_span(source / f"span-{WINDOW + 1}", rows, seed=WINDOW + 1)
    second = {side: _run(work, side, "next", [*common, *extra]) for side, extra in SIDES.items()}
    c, n = second["cache"], second["no_cache"]
    return {"rows_per_span": rows, "window": WINDOW, "beam": beam, "first": first, "next": second,
            "transform_ratio": round(c["components"]["Transform"]["seconds"]
                                     / n["components"]["Transform"]["seconds"], 3),
            "wall_ratio": round(c["wall_seconds"] / n["wall_seconds"], 3)}


def _run(work: Path, side: str, which: str, overrides: list[str]) -> dict:
    root = work / f"cache-bench-{side}"
    print(f"  {which} run, {side.replace('_', ' ')} ...", flush=True)
    result = measure_ours(root, str(work / f"cache-{side}-{which}.log"), f"the {which} run ({side})", overrides)
    result["analyzed_spans"], result["cached_spans"] = _transform_spans(
        load_config(CONFIG_FILE, [f"pipeline.root={root}", *overrides]))
    print(f"    {result['wall_seconds']:.1f}s, Transform {result['components']['Transform']['seconds']:.1f}s, "
          f"analyzed [{result['analyzed_spans']}], from the cache [{result['cached_spans']}]", flush=True)
    return result


def _transform_spans(config) -> tuple[str, str]:
    from pipeline.runs.summary import summarize  # TFMA: imported only once a run is to be read

    graph = summarize(config.pipeline.metadata_path, config.pipeline.name).output("Transform", "TransformGraph")
    props = graph.properties if graph else {}
    return str(props.get("analyzed_spans", "")), str(props.get("cached_spans", ""))
