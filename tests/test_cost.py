"""The trainer's hours and estimated cost: CPU-hours locally, pool-hours times a configured price on Vertex."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError, load_config
from pipeline.runs.cost import trainer_cost
from pipeline.runs.summary import ComponentRun, RunSummary
from trainer.outcome import ExportChoice, Outcome

# Test figures, not real prices: the test is about how a configured price is used and labelled.
SOURCE = "https://cloud.google.com/vertex-ai/pricing"
PRICES = ["vertex.prices.tpu_v5e.usd_per_hour=4.0", "vertex.prices.tpu_v5e.read_on=2026-12-01",
          f"vertex.prices.tpu_v5e.source={SOURCE}", "vertex.prices.gpu.usd_per_hour=1.0",
          "vertex.prices.gpu.read_on=2026-11-30", f"vertex.prices.gpu.source={SOURCE}"]


def _summary(trainer_state: str = "ran", seconds: float = 1800.0, cpu_seconds: float = 720.0) -> RunSummary:
    summary = RunSummary(run_id="r", components=[ComponentRun("Trainer", trainer_state, seconds, 1)], metrics={},
                         baseline_metrics={}, blessed=None, validation_failures=[], pushed_path=None,
                         pushed_version=None)
    summary.trainer = Outcome(ExportChoice("best", 100, "accuracy", True, 0.9), None, 10.0, cpu_seconds)
    return summary


def test_local_hours_are_the_trainers_cpu_hours_with_no_price():
    cost = trainer_cost(_summary(cpu_seconds=720.0), load_config("configs/local.yaml"))
    assert cost.where == "local" and cost.pool_hours == pytest.approx(0.2) and cost.usd is None
    assert "CPU-hours" in cost.describe() and "$" not in cost.describe()


def test_vertex_cost_is_pool_hours_at_the_presets_price_and_says_it_is_an_estimate():
    config = load_config("configs/vertex.yaml", PRICES)
    cost = trainer_cost(_summary(seconds=1800.0), config)
    assert cost.where == "tpu_v5e" and cost.pool_hours == pytest.approx(0.5) and cost.usd == pytest.approx(2.0)
    text = cost.describe()
    assert "estimated cost $2.0000 at $4.0/h" in text and f"read 2026-12-01 from {SOURCE}" in text
    assert "not a bill" in text and "measured" not in text.replace("not measured", "")
    # Another preset: the same hours at its price, said plainly to be a price ratio only.
    assert cost.others == {"gpu": pytest.approx(0.5)}
    assert "gpu $0.5000 (price ratio only: their throughput on this training is not measured)" in text


def test_replicas_multiply_the_hours_and_a_preset_without_a_price_gets_no_estimate():
    config = load_config("configs/vertex.yaml", ["vertex.worker_pool.preset=cpu", "vertex.worker_pool.extra_workers=2"])
    cost = trainer_cost(_summary(seconds=1200.0), config)
    assert cost.pool_hours == pytest.approx(1.0) and cost.usd is None
    assert "no price for preset cpu in vertex.prices" in cost.describe()


def test_a_cached_trainer_cost_nothing_and_a_missing_one_has_no_figure():
    config = load_config("configs/vertex.yaml", PRICES)
    assert trainer_cost(_summary("cached"), config).usd == 0.0
    blocked = _summary()
    blocked.components = []
    assert trainer_cost(blocked, config).pool_hours is None


@pytest.mark.parametrize("override, message", [
    ("vertex.prices.tpu_v5e.usd_per_hour=0", "greater than 0"),
    ("vertex.prices.tpu_v5e.source=cloud.google.com/vertex-ai/pricing", "https:// address"),
    ("vertex.prices.tpu_v9.usd_per_hour=1.0", "tpu_v9"),
])
def test_a_price_must_be_positive_dated_and_sourced(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("configs/vertex.yaml", [p for p in PRICES if not p.startswith(override.rsplit("=", 1)[0])]
                    + [override])
