"""What a run's training cost: the trainer's and the tuning trials' pool-hours and, from the prices, an estimate.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
from typing import Optional

from components.tuner import LATEST_TUNING_ID, TUNER_ID
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
    # The tuning trials' hours in this run, in the same unit (components/tuner/record.py); None: no search ran.
    tuning_hours: Optional[float] = None
    tuning: str = ""  # what they are: "4 trials", "reused the last search", "from cache"

    @property
    def total_hours(self) -> Optional[float]:
        """The trainer's and the trials' hours: what the estimate prices (trials x their accelerator hours)."""
        if self.pool_hours is None and self.tuning_hours is None:
            return None
        return (self.pool_hours or 0.0) + (self.tuning_hours or 0.0)

    @property
    def usd(self) -> Optional[float]:
        hours = self.total_hours
        return None if self.price is None or hours is None else hours * self.price.usd_per_hour

    def describe(self) -> str:
        tuning = f"; tuning: {self.tuning}" + (f", {self.tuning_hours:.4f} h" if self.tuning_hours is not None
                                               else "") if self.tuning else ""
        if self.pool_hours is None:
            return f"trainer: {self.what}{tuning}"
        text = f"trainer: {self.pool_hours:.4f} {self.what}{tuning}"
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
    """The Trainer's hours plus the tuning trials' (they run on the Trainer's pool), priced together."""
    cost = _trainer_cost(summary, config)
    hours, what = _tuning_hours(summary)
    if not what:
        return cost
    cost = dataclasses.replace(cost, tuning_hours=hours, tuning=what)
    if cost.others:
        total = cost.total_hours or 0.0
        others = {name: total * price.usd_per_hour for name, price in config.vertex.prices.items()
                  if name in cost.others}
        cost = dataclasses.replace(cost, others=others)
    return cost


def _tuning_hours(summary: RunSummary) -> tuple[Optional[float], str]:
    """The trials' hours in this run: none when the search came from cache or was reused (tuning.reuse)."""
    if summary.component(LATEST_TUNING_ID) is not None:
        return 0.0, "reused the last search"
    tuner = summary.component(TUNER_ID)
    if tuner is None:
        return None, ""
    if tuner.state == "cached":
        return 0.0, "the Tuner came from cache: no trial ran in this run"
    if summary.tuning is None:
        return None, f"the Tuner {tuner.state}, no record"
    return summary.tuning.hours, f"{len(summary.tuning.trials)} trials ({summary.tuning.hours_are})"


def _trainer_cost(summary: RunSummary, config: Config) -> TrainerCost:
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
