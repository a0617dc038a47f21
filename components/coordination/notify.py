"""A run's outcome, sent to a person: one JSON message to a Pub/Sub topic and/or a webhook; never fails the run."""

from __future__ import annotations

import dataclasses
import json
import logging
import urllib.request
from typing import Optional

log = logging.getLogger(__name__)

SUCCEEDED, FAILED, CANCELLED, UNKNOWN = "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the message says: the run's state and, as far as it is known, why and what it pushed."""
    pipeline: str
    run: str
    state: str
    failed_task: str = ""
    error: str = ""
    pushed_version: str = ""
    metric: str = ""             # the task's main metric, e.g. "accuracy"
    metric_value: Optional[float] = None
    link: str = ""               # the run's page: the backend's console, or a local run's report

    def message(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in ("", None)}

    def headline(self) -> str:
        what = f"{self.pipeline} run {self.run}: {self.state}"
        if self.failed_task:
            what += f" in {self.failed_task}"
        if self.pushed_version:
            what += f", pushed version {self.pushed_version}"
        return what


def send(outcome: Outcome, pubsub_topic: str = "", webhook_url: str = "", timeout: float = 30.0) -> list[str]:
    """Publish the outcome to each destination set; returns what happened to each, one line apiece. A failure
    to notify is logged and said, never raised: the run's own outcome stands."""
    said = []
    body = json.dumps(outcome.message(), sort_keys=True).encode()
    if pubsub_topic:
        said.append(_guard(f"Pub/Sub {pubsub_topic}", lambda: _publish(pubsub_topic, body, outcome, timeout)))
    if webhook_url:
        said.append(_guard(f"webhook {webhook_url}", lambda: _post(webhook_url, body, timeout)))
    return said


def _guard(where: str, send_one) -> str:
    try:
        return f"notified {where}: {send_one()}"
    except Exception as e:  # noqa: BLE001 - whatever the destination does, the run is not failed by it
        log.warning("could not notify %s: %s: %s", where, type(e).__name__, e)
        return f"could not notify {where}: {type(e).__name__}: {e}"


def _publish(topic: str, body: bytes, outcome: Outcome, timeout: float) -> str:
    # google-cloud-pubsub honours PUBSUB_EMULATOR_HOST (an insecure channel, no credentials) when it is set.
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient()
    future = publisher.publish(topic, body, state=outcome.state, pipeline=outcome.pipeline)
    return f"message {future.result(timeout=timeout)}"


def _post(url: str, body: bytes, timeout: float) -> str:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the URL is checked in config
        return f"HTTP {response.status}"
