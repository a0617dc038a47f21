"""A run's outcome reaches a person (components/coordination/notify.py): one JSON message to a Pub/Sub topic (the real
google-cloud-pubsub client against tests/fake_pubsub.py) and/or a webhook; a failure to notify never fails the run."""

from __future__ import annotations

import pytest

from components.coordination import notify
from pipeline.config import load_config
from pipeline.errors import ConfigError
from tests.conftest import CONFIG
from tests.fake_http import Hook
from tests.fake_pubsub import FakePubsub

TOPIC = "projects/my-gcp-project/topics/pipeline-runs"
OUTCOME = notify.Outcome(pipeline="penguin-tpu", run="run-1", state=notify.FAILED, failed_task="Transform",
                         error="OOM", link="https://example.test/run-1")


@pytest.fixture
def pubsub(monkeypatch):
    fake = FakePubsub(topics={TOPIC})
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", fake.start())
    yield fake
    fake.stop()


def test_the_outcome_is_published_to_the_topic_and_posted_to_the_webhook(pubsub):
    hook = Hook()
    url = hook.start()
    try:
        said = notify.send(OUTCOME, TOPIC, f"{url}/runs")
    finally:
        hook.stop()
    assert said == [f"notified Pub/Sub {TOPIC}: message 1", f"notified webhook {url}/runs: HTTP 200"], said
    [message] = pubsub.published
    assert message.json() == {"pipeline": "penguin-tpu", "run": "run-1", "state": "FAILED",
                              "failed_task": "Transform", "error": "OOM", "link": "https://example.test/run-1"}
    assert message.attributes == {"state": "FAILED", "pipeline": "penguin-tpu"}
    [posted] = hook.requests
    assert posted.method == "POST" and posted.path == "/runs" and posted.body == message.json()


def test_a_destination_that_refuses_is_said_and_logged_never_raised(pubsub, caplog):
    hook = Hook(status=500)
    url = hook.start()
    try:
        said = notify.send(OUTCOME, "projects/my-gcp-project/topics/no-such-topic", url)
    finally:
        hook.stop()
    assert said[0].startswith("could not notify Pub/Sub projects/my-gcp-project/topics/no-such-topic: NotFound")
    assert said[1].startswith(f"could not notify webhook {url}: HTTPError")
    assert not pubsub.published and "could not notify" in caplog.text


@pytest.mark.parametrize("setting, message", [
    ("notify.pubsub_topic=pipeline-runs", "is not a Pub/Sub topic name"),
    ("notify.webhook_url=http://hooks.example.com/x", "plain http is only allowed to this machine"),
    ("notify.on=sometimes", "notify.on"),
])
def test_bad_notify_settings_are_config_errors(setting, message):
    with pytest.raises(ConfigError, match=message):
        load_config(CONFIG, [setting])
