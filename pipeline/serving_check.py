"""`python -m pipeline serving check`: record a scrape of each track's TF Serving Prometheus page, let
components/serving/canary_check.py decide on the recorded window, and promote, roll back or wait, saying why.
Why and sources: docs/serving.md."""

from __future__ import annotations

import time
import urllib.request
from typing import Optional

from components.errors import CanaryMetricsError, RolloutError, VertexStateMismatch
from components.serving.canary_check import judge
from components.serving.canary_monitoring import for_endpoint
from components.serving.canary_prometheus import PrometheusScrapes, record
from pipeline.config import Config
from pipeline.endpoints import parse_endpoint
from pipeline.errors import CommandFailed, ConfigError

SCRAPE_TIMEOUT_SECONDS = 10.0


def scrape(url: str, directory: str, track: str, now: Optional[float] = None) -> str:
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
    return record(directory, track, text, time.time() if now is None else now)


def check(config: Config, metrics_dir: Optional[str], urls: dict, apply: bool) -> str:
    from pipeline.serving import endpoint_target, move

    base = config.pipeline.serving_dir
    target = endpoint_target(config)
    if target is not None and (metrics_dir or any(urls.values())):
        raise ConfigError("--metrics-dir and --stable-url/--canary-url are TF Serving's scrapes; with "
                          "serving.target vertex_endpoint the check reads the endpoint's Cloud Monitoring series")
    directory = metrics_dir or config.serving_metrics_dir
    for track, url in urls.items():
        if url:
            scrape(url, directory, track)
    def source_for(labels):
        return (for_endpoint(target, base, labels, config.serving.check.monitoring_endpoint) if target is not None
                else PrometheusScrapes(directory, config.pipeline.name))
    try:
        line, decision = judge(base, source_for, config.serving.check.rules(), time.time())
    except CanaryMetricsError as e:
        raise ConfigError(str(e)) from None
    except (VertexStateMismatch, RolloutError) as e:
        raise CommandFailed(str(e)) from None
    if decision is None:
        return line
    if apply and decision.action in ("promote", "rollback"):
        return line + "\n" + move(config, decision.action)
    return line + ("" if apply or decision.action == "wait" else " (--dry-run: nothing changed)")

