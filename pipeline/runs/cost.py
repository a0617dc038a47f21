"""What a run's training cost: the trainer's pool-hours and, from the configured prices, an estimate.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
from typing import Optional

from pipeline.config import Config
from pipeline.runs.summary import RunSummary
from pipeline.sections.vertex import Price


@dataclasses.dataclass(frozen=True)
class TrainerCost:
    where: str  # "local" or the Vertex worker-pool preset
    pool_hours: Optional[float]  # None: the Trainer did not run, or recorded no time
    what: str  # what the hours are
    price: Optional[Price] = None
    # Other presets with a price: the same hours at their price (their throughput not measured).
    others: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def usd(self) -> Optional[float]:
        return None if self.price is None or self.pool_hours is None else self.pool_hours * self.price.usd_per_hour

    def describe(self) -> str:
        if self.pool_hours is None:
            return f"trainer: {self.what}"
        text = f"trainer: {self.pool_hours:.4f} {self.what}"
        if self.usd is not None:
            p = self.price
            text += (f"; estimated cost ${self.usd:.4f} at ${p.usd_per_hour}/h for {self.where} "
                     f"(price read {p.read_on} from {p.source}; an estimate, not a bill)")
        elif self.where != "local":
            text += f"; no price for preset {self.where} in vertex.prices, so no cost estimate"
        if self.others:
            text += ("; the same hours on " + ", ".join(f"{k} ${v:.4f}" for k, v in sorted(self.others.items()))
                     + " (price ratio only: their throughput on this training is not measured)")
        return text


def trainer_cost(summary: RunSummary, config: Config) -> TrainerCost:
    vertex = config.vertex
    where = "local" if vertex is None else vertex.worker_pool.preset
    trainer = summary.component("Trainer")
    if trainer is None:
        return TrainerCost(where, None, "did not run")
    if trainer.state == "cached":
        return TrainerCost(where, 0.0, "pool-hours (the Trainer came from cache: nothing trained in this run)",
                           vertex.prices.get(where) if vertex is not None else None)
    if vertex is None:
        if summary.trainer is None:
            return TrainerCost(where, None, "recorded no CPU time (trainer/outcome.py)")
        return TrainerCost(where, summary.trainer.cpu_seconds / 3600, "CPU-hours (local: no worker pool)")
    replicas = 1 + vertex.worker_pool.extra_workers
    hours = trainer.seconds * replicas / 3600
    others = {name: hours * price.usd_per_hour for name, price in vertex.prices.items() if name != where}
    return TrainerCost(where, hours, f"pool-hours ({replicas} replica(s) x the Trainer's wall time)",
                       vertex.prices.get(where), others)
