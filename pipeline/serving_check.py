"""`python -m pipeline serving check`: the canary against stable on TF Serving's own Prometheus metrics, recorded
per Deployment; promote, roll back or wait, saying why. Why and sources: docs/serving.md."""

from __future__ import annotations

import dataclasses
import os
import time
import urllib.request
from pathlib import Path
from typing import Optional

from components import rollout
from components.model_config import CANARY, STABLE
from pipeline.config import Config
from pipeline.endpoints import parse_endpoint
from pipeline.errors import CommandFailed, ConfigError
from pipeline.sections.serving import CheckSection

# tensorflow_serving/servables/tensorflow/util.cc: Counter "/tensorflow/serving/request_count" (labels model_name,
# status: the error code's name, "OK" on success) and Sampler "/tensorflow/serving/request_latency" (labels
# model_name, API, entrypoint; microseconds). Its Prometheus exporter writes "/" as ":"; a histogram as _sum/_count.
REQUEST_COUNT = ":tensorflow:serving:request_count"
LATENCY_SUM, LATENCY_COUNT = ":tensorflow:serving:request_latency_sum", ":tensorflow:serving:request_latency_count"
TRACKS = (STABLE, CANARY)
SCRAPE_TIMEOUT_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class Totals:
    """One scrape's counters for the model: requests by status, and the latency histogram's sum and count."""
    requests: dict
    latency_us: float
    latency_count: float

    @property
    def total(self) -> float:
        return sum(self.requests.values())


def parse(text: str, model_name: str) -> Totals:
    from prometheus_client.parser import text_string_to_metric_families

    requests: dict = {}
    latency_us = latency_count = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("model_name") != model_name:
                continue
            name = sample.name.removesuffix("_total")  # the client names a typed counter's samples <name>_total
            if name == REQUEST_COUNT:
                status = sample.labels.get("status", "")
                requests[status] = requests.get(status, 0.0) + sample.value
            elif name == LATENCY_SUM:
                latency_us += sample.value
            elif name == LATENCY_COUNT:
                latency_count += sample.value
    return Totals(requests, latency_us, latency_count)


def _delta(first: Totals, last: Totals) -> Totals:
    """What happened between two scrapes; a counter lower than before was reset (a restarted server): it counts
    from zero, as Prometheus's rate() takes it."""
    def d(a: float, b: float) -> float:
        return b - a if b >= a else b
    statuses = set(first.requests) | set(last.requests)
    return Totals({s: d(first.requests.get(s, 0.0), last.requests.get(s, 0.0)) for s in statuses},
                  d(first.latency_us, last.latency_us), d(first.latency_count, last.latency_count))


@dataclasses.dataclass(frozen=True)
class Decision:
    action: str  # promote | rollback | wait | none
    why: str


def _series(directory: Path, track: str, since: float) -> list[tuple[float, str]]:
    """(scraped at, text) of a track's recorded scrapes (<dir>/<track>/<unix seconds>.prom) from `since` on."""
    out = []
    for path in sorted((directory / track).glob("*.prom")):
        try:
            when = float(path.stem)
        except ValueError:
            raise ConfigError(f"{path}: a recorded scrape is named by its unix time, e.g. 1796234632.prom") from None
        if when >= since:
            out.append((when, path.read_text()))
    return sorted(out)


def decide(directory: Path, model_name: str, canary_since: float, rules: CheckSection,
           now: Optional[float] = None) -> Decision:
    """The canary (out since `canary_since`) against stable over the same recorded window."""
    now = time.time() if now is None else now
    age = (now - canary_since) / 60
    if age < rules.min_canary_minutes:
        return Decision("wait", f"the canary is out {age:.0f} min, fewer than serving.check.min_canary_minutes "
                                f"({rules.min_canary_minutes:g})")
    windows = {}
    for track in TRACKS:
        series = _series(directory, track, canary_since)
        if len(series) < 2:
            return Decision("wait", f"{len(series)} scrape(s) of {track} since the canary went out; two are needed")
        windows[track] = _delta(parse(series[0][1], model_name), parse(series[-1][1], model_name))
    stable, canary = windows["stable"], windows["canary"]
    if canary.total < rules.min_requests:
        return Decision("wait", f"the canary answered {canary.total:.0f} requests, fewer than "
                                f"serving.check.min_requests ({rules.min_requests})")
    if stable.total == 0:
        return Decision("wait", "stable answered no requests in the window: nothing to compare with")
    errors = {t: 1 - w.requests.get("OK", 0.0) / w.total for t, w in windows.items()}
    if errors["canary"] > errors["stable"] + rules.max_error_rate_increase:
        return Decision("rollback", f"canary error rate {errors['canary']:.2%} against stable's {errors['stable']:.2%}"
                                    f" (allowed +{rules.max_error_rate_increase:.2%})")
    means = {t: w.latency_us / w.latency_count / 1000 for t, w in windows.items() if w.latency_count}
    if len(means) == 2 and means["canary"] > means["stable"] * rules.max_latency_ratio:
        return Decision("rollback", f"canary mean latency {means['canary']:.1f} ms against stable's "
                                    f"{means['stable']:.1f} ms (allowed x{rules.max_latency_ratio:g})")
    latency = f", mean latency {means['canary']:.1f} ms vs {means['stable']:.1f} ms" if len(means) == 2 else ""
    return Decision("promote", f"over {age:.0f} min and {canary.total:.0f} requests the canary's error rate "
                               f"{errors['canary']:.2%} vs stable's {errors['stable']:.2%}{latency}")


def scrape(url: str, directory: Path, track: str, now: Optional[float] = None) -> Path:
    """Record one scrape of a track's /monitoring/prometheus/metrics under <dir>/<track>/<unix seconds>.prom."""
    try:
        parse_endpoint(url, f"--{track}-url", bare_host=False, in_cluster=True)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_SECONDS) as answer:
            text = answer.read().decode()
    except OSError as e:
        raise CommandFailed(f"could not scrape {track} metrics at {url}: {e}") from None
    path = directory / track / f"{time.time() if now is None else now:.3f}.prom"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def check(config: Config, metrics_dir: Optional[str], urls: dict, apply: bool) -> str:
    from pipeline.serving import move

    base = config.pipeline.serving_dir
    if metrics_dir is None and config.pipeline.root_uri.startswith("gs://"):
        raise ConfigError("serving check keeps its recorded scrapes on this machine: name a local --metrics-dir")
    directory = Path(metrics_dir or os.path.join(config.pipeline.root_uri, "serving_metrics"))
    for track, url in urls.items():
        if url:
            scrape(url, directory, track)
    labels = rollout.labels(base)
    if labels.canary is None:
        return f"serving check: no canary is out (stable {labels.stable}); nothing to decide"
    pushed = [e for e in rollout.events(base) if e.canary == labels.canary and e.before_canary != labels.canary]
    since = _epoch(pushed[-1].when) if pushed else 0.0
    decision = decide(directory, config.pipeline.name, since, config.serving.check)
    line = f"serving check: {decision.action} canary {labels.canary}: {decision.why}"
    if apply and decision.action in ("promote", "rollback"):
        return line + "\n" + move(config, decision.action)
    return line + ("" if apply or decision.action == "wait" else " (--dry-run: nothing changed)")


def _epoch(iso: str) -> float:
    import calendar

    return float(calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))
