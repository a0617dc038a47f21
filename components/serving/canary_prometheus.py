"""The canary check's TF Serving source: each track's Deployment's own Prometheus page, recorded as scrapes
<dir>/<track>/<unix seconds>.prom (local or gs://); a window is the difference between its first and last scrape.
Why and sources: docs/serving.md, "`serving check`"."""

from __future__ import annotations

import dataclasses

from components.errors import CanaryMetricsError, CanaryUnobserved
from components.serving.canary_check import TRACKS, Window
from components.storage import storage_for

# tensorflow_serving/servables/tensorflow/util.cc: Counter "/tensorflow/serving/request_count" (labels model_name,
# status: the error code's name, "OK" on success) and Sampler "/tensorflow/serving/request_latency" (labels
# model_name, API, entrypoint; microseconds). Its Prometheus exporter writes "/" as ":"; a histogram as _sum/_count.
REQUEST_COUNT = ":tensorflow:serving:request_count"
LATENCY_SUM, LATENCY_COUNT = ":tensorflow:serving:request_latency_sum", ":tensorflow:serving:request_latency_count"
SCRAPE_SUFFIX = ".prom"


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


def _delta(first: Totals, last: Totals) -> Window:
    """What happened between two scrapes; a counter lower than before was reset (a restarted server): it counts
    from zero, as Prometheus's rate() takes it."""
    def d(a: float, b: float) -> float:
        return b - a if b >= a else b
    statuses = set(first.requests) | set(last.requests)
    # TF Serving's status "OK" is the decision's OK.
    return Window({s: d(first.requests.get(s, 0.0), last.requests.get(s, 0.0)) for s in statuses},
                  d(first.latency_us, last.latency_us) / 1000, d(first.latency_count, last.latency_count))


def record(directory: str, track: str, text: str, when: float, gcs_client=None) -> str:
    """Keep one scrape of a track (local or gs://); returns its path under `directory`."""
    # Truncated, never rounded, to the millisecond: a name later than the scrape could fall after the check's own
    # "now" taken a moment later, and the check would not see the scrape it just made.
    millis = int(when * 1000)
    name = f"{track}/{millis // 1000}.{millis % 1000:03d}{SCRAPE_SUFFIX}"
    storage_for(directory, gcs_client).create(name, text.encode())
    return f"{directory.rstrip('/')}/{name}"


def recorded(directory: str, track: str, since: float, gcs_client=None) -> list[tuple[float, str]]:
    """(scraped at, text) of a track's recorded scrapes from `since` on, oldest first."""
    store = storage_for(directory, gcs_client)
    out = []
    for path in store.list(track):
        folder, _, name = path.rpartition("/")
        if folder != track or not name.endswith(SCRAPE_SUFFIX):
            continue
        try:
            when = float(name[:-len(SCRAPE_SUFFIX)])
        except ValueError:
            raise CanaryMetricsError(f"{directory}/{path}: a recorded scrape is named by its unix time, e.g. "
                                     f"1796234632{SCRAPE_SUFFIX}") from None
        if when >= since:
            with store.open_read(path) as f:
                out.append((when, f.read().decode()))
    return sorted(out)


@dataclasses.dataclass(frozen=True)
class PrometheusScrapes:
    """The model `model_name`'s lines in each track's scrapes under `directory` (local or gs://)."""
    directory: str
    model_name: str

    def windows(self, since: float, now: float) -> dict:
        out = {}
        for track in TRACKS:
            series = [(when, text) for when, text in recorded(str(self.directory), track, since) if when <= now]
            if len(series) < 2:
                raise CanaryUnobserved(f"{len(series)} scrape(s) of {track} since the canary went out; two are needed")
            out[track] = _delta(parse(series[0][1], self.model_name), parse(series[-1][1], self.model_name))
        return out
