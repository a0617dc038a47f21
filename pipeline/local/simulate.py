"""`python -m pipeline simulate`: scheduled retraining on this machine, span by span.
Why and sources: docs/internals.md."""

from __future__ import annotations

import os
import sys
from typing import Optional, TextIO

from pipeline.config import Config, resolve
from pipeline.errors import EXIT_OK, ConfigError, PipelineFailed
from pipeline.local import span_data
from pipeline.runs.history import format_history, history, main_metric
from pipeline.runs.history_page import write_history_page


def simulate(config: Config, spans: int, drift_at: Optional[int], rows: int, seed: int = 0,
             source_csv: str = "data/penguins/penguins.csv", stream: Optional[TextIO] = None) -> int:
    from pipeline.local.runner import run_local

    stream = stream or sys.stdout
    if not config.data.spans or not config.data.schema_file:
        raise ConfigError("simulate needs data.spans (e.g. window(2)) and data.schema_file (see configs/simulate.yaml)")
    source = resolve(config.data.input_dir)
    if os.path.isdir(source) and os.listdir(source):
        raise ConfigError(f"data.input_dir {source} is not empty; the simulation writes its own spans there "
                          "(remove it, or `make simulate`, which starts from scratch)")
    recipe = span_data.Recipe.from_config(config)
    drift = recipe.drift
    for n in range(1, spans + 1):
        span_data.write_spans(resolve(source_csv), source, recipe, count=1, first=n, rows=rows,
                              drift_at=drift_at, seed=seed, marker=config.data.span_ready_marker)
        shifted = f" (shifted: {drift.numeric} x{span_data.SCALE:g}, fewer of one {drift.categorical})" \
            if drift_at is not None and n >= drift_at else ""
        stream.write(f"\n=== span-{n} landed{shifted}; the schedule fires ===\n")
        try:
            run_local(config, stream)
        except PipelineFailed as e:
            stream.write(f"run stopped: {str(e).splitlines()[0]}\n")
            stream.write("".join(f"  {line}\n" for line in str(e).splitlines()[1:] if line.startswith("  ")))
    rows = history(config)
    stream.write("\nhistory:\n" + format_history(rows, main_metric(config).label) + "\n")
    stream.write(f"history page: {write_history_page(config, rows)}\n")
    return EXIT_OK
