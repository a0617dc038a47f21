"""The canary against stable on live traffic: promote, roll back or wait, saying why. The decision only; the traffic
of each track over the window comes from a metric source (components/serving/canary_prometheus.py: TF Serving's recorded
Prometheus scrapes; components/serving/canary_monitoring.py: Cloud Monitoring's series of a Vertex AI endpoint).
Why and sources: docs/serving.md, "`serving check`"."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Protocol

from components.errors import CanaryUnobserved
from components.serving import rollout
from components.serving.model_config import CANARY, STABLE, Labels

TRACKS = (STABLE, CANARY)
OK = "OK"  # the status of a request answered without error, whatever the source calls it


@dataclasses.dataclass(frozen=True)
class Window:
    """One track's traffic over the window: requests by status (OK or an error's name), and the latency of the
    requests timed, as a sum in milliseconds and a count."""
    requests: dict
    latency_ms: float
    latency_count: float

    @property
    def total(self) -> float:
        return sum(self.requests.values())

    @property
    def error_rate(self) -> float:
        return 1 - self.requests.get(OK, 0.0) / self.total

    @property
    def mean_latency_ms(self):
        return self.latency_ms / self.latency_count if self.latency_count else None


class MetricSource(Protocol):
    def windows(self, since: float, now: float) -> dict:
        """{stable: Window, canary: Window} over (since, now]; raises CanaryUnobserved (wait) or an error of its own."""


@dataclasses.dataclass(frozen=True)
class Rules:
    """serving.check (pipeline/sections/serving.py, where the defaults are)."""
    min_canary_minutes: float
    min_requests: int
    max_error_rate_increase: float
    max_latency_ratio: float


@dataclasses.dataclass(frozen=True)
class Decision:
    action: str  # promote | rollback | wait
    why: str


def decide(source: MetricSource, canary_since: float, rules: Rules, now: float) -> Decision:
    """The canary (out since `canary_since`, unix seconds) against stable over the same window."""
    age = (now - canary_since) / 60
    if age < rules.min_canary_minutes:
        return Decision("wait", f"the canary is out {age:.0f} min, fewer than serving.check.min_canary_minutes "
                                f"({rules.min_canary_minutes:g})")
    try:
        windows = source.windows(canary_since, now)
    except CanaryUnobserved as e:
        return Decision("wait", str(e))
    stable, canary = windows[STABLE], windows[CANARY]
    if canary.total < rules.min_requests:
        return Decision("wait", f"the canary answered {canary.total:.0f} requests, fewer than "
                                f"serving.check.min_requests ({rules.min_requests})")
    if stable.total == 0:
        return Decision("wait", "stable answered no requests in the window: nothing to compare with")
    errors = {STABLE: stable.error_rate, CANARY: canary.error_rate}
    if errors[CANARY] > errors[STABLE] + rules.max_error_rate_increase:
        return Decision("rollback", f"canary error rate {errors[CANARY]:.2%} against stable's {errors[STABLE]:.2%}"
                                    f" (allowed +{rules.max_error_rate_increase:.2%})")
    means = {STABLE: stable.mean_latency_ms, CANARY: canary.mean_latency_ms}
    timed = None not in means.values()
    if timed and means[CANARY] > means[STABLE] * rules.max_latency_ratio:
        return Decision("rollback", f"canary mean latency {means[CANARY]:.1f} ms against stable's "
                                    f"{means[STABLE]:.1f} ms (allowed x{rules.max_latency_ratio:g})")
    latency = f", mean latency {means[CANARY]:.1f} ms vs {means[STABLE]:.1f} ms" if timed else ""
    return Decision("promote", f"over {age:.0f} min and {canary.total:.0f} requests the canary's error rate "
                               f"{errors[CANARY]:.2%} vs stable's {errors[STABLE]:.2%}{latency}")


def judge(base: str, source_for: Callable[[Labels], MetricSource], rules: Rules,
          now: float) -> tuple[str, Optional[Decision]]:
    """The decision on the canary out now in serving dir `base`, and the line saying it; no decision when none is
    out. `source_for(labels)` gives the metric source of those labels' tracks."""
    current = rollout.labels(base)
    if current.canary is None:
        return f"serving check: no canary is out (stable {current.stable}); nothing to decide", None
    decision = decide(source_for(current), rollout.canary_since(base), rules, now)
    return f"serving check: {decision.action} canary {current.canary}: {decision.why}", decision
