"""The `serving` section: how a pushed model reaches TF Serving's traffic (rollout), the warm-up requests and the
serving gate before the push.
Why and sources: docs/serving.md."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator

from components.canary_check import Rules
from components.serving_gate import GateSettings
from components.warmup import MAX_REQUESTS
from trainer.config import Section, validate_uri


class CheckSection(Section):
    """`python -m pipeline serving check`: when the canary's live metrics decide (components/canary_check.py)."""
    # Nothing is decided before the canary has been out this long and answered this many requests.
    min_canary_minutes: float = Field(60.0, ge=0)
    min_requests: int = Field(200, ge=1)
    # Roll back when the canary's share of non-OK answers exceeds stable's by more than this (0.01: one point) ...
    max_error_rate_increase: float = Field(0.01, ge=0, le=1)
    # ... or its mean request latency is more than this many times stable's.
    max_latency_ratio: float = Field(1.5, ge=1)
    # Where the scrapes are recorded (`serving check --stable-url/--canary-url` writes them) and read, local or
    # gs://; empty: <pipeline.root>/serving_metrics (Config.serving_metrics_dir).
    metrics_dir: Optional[str] = None
    # Also decide as each run's first step, after the run lease and before the Snapshot, on the scrapes recorded
    # there (components/canary_check_component.py): a run then starts from what the evidence says should serve.
    # Off in every shipped config: without a recorder of scrapes the step can only wait (docs/serving.md).
    before_run: bool = False

    @field_validator("metrics_dir")
    @classmethod
    def _metrics_dir(cls, v: Optional[str]) -> Optional[str]:
        return None if v in (None, "") else validate_uri(v, "serving.check.metrics_dir")

    def rules(self) -> Rules:
        return Rules(self.min_canary_minutes, self.min_requests, self.max_error_rate_increase, self.max_latency_ratio)


class ServingSection(Section):
    # direct: a push serves at once under the label `stable`; canary: it is added under `canary` while `stable` keeps
    # serving, until `python -m pipeline serving promote` (or rollback). The first push of a root is stable either
    # way. configs/local.yaml keeps direct (docs/serving.md says why), the cloud configs choose canary.
    rollout: Literal["direct", "canary"] = "direct"
    # Warm-up requests (assets.extra/tf_serving_warmup_requests): this many eval rows, one request each; the
    # serving gate replays them in a TensorFlow-only process. TF Serving reads at most 1000.
    warmup_requests: int = Field(8, ge=1, le=MAX_REQUESTS)
    # The slowest replayed request (after one untimed pass that pays TF's lazy initialisation) must answer within this.
    max_latency_ms: float = Field(1000.0, gt=0)
    # The probe process as a whole: importing TensorFlow, loading the model, both passes.
    gate_timeout_seconds: float = Field(300.0, gt=0)
    check: CheckSection = CheckSection()

    def gate_settings(self, model_name: str, drop_features: tuple[str, ...]) -> GateSettings:
        return GateSettings(model_name=model_name, warmup_requests=self.warmup_requests,
                            max_latency_ms=self.max_latency_ms, timeout_seconds=self.gate_timeout_seconds,
                            drop_features=drop_features, rollout=self.rollout)
