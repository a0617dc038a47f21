"""components/serving/canary_monitoring.py: the canary check on a Vertex AI endpoint's Cloud Monitoring series, read
by the
real google-cloud-monitoring client from the stand-in (tests/fake_monitoring.py): promote a canary as good as
stable, roll back a failing one and a slow one, count only the window, and refuse series that can't tell the
deployed models apart; the stand-in refuses what the API documents it refuses."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions

from components.errors import CanaryMetricsError
from components.serving.canary_check import decide
from components.serving.canary_monitoring import (
    DEPLOYED_MODEL,
    ENDPOINT,
    ERROR_COUNT,
    LATENCIES,
    PREDICTION_COUNT,
    EndpointMetrics,
)
from pipeline.sections.serving import CheckSection
from tests.fake_monitoring import FakeMonitoring

PROJECT, REGION, ENDPOINT_ID = "my-project", "us-central1", "1234567890"
STABLE_ID, CANARY_ID = "111", "222"
RULES = CheckSection(min_canary_minutes=30, min_requests=100, max_error_rate_increase=0.01,
                     max_latency_ratio=1.5).rules()
T0 = 1_796_000_040.0  # the canary's push


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _series(metric: str, model: str, values: list, kind: str = "DELTA", endpoint: str = ENDPOINT_ID,
            labels: dict = None) -> dict:
    """One series as projects.timeSeries.list returns it: a point a minute (DELTA), from T0 - 10 min on."""
    distribution = metric == LATENCIES
    points = []
    for minute, value in enumerate(values):
        end = T0 + (minute - 10) * 60 + 60
        points.append({"interval": {"startTime": _rfc3339(end - 60), "endTime": _rfc3339(end)},
                       "value": ({"distributionValue": {"count": str(value[0]), "mean": value[1]}} if distribution
                                 else {"int64Value": str(value)})})
    return {"metric": {"type": metric, "labels": {DEPLOYED_MODEL: model} if labels is None else labels},
            "resource": {"type": ENDPOINT, "labels": {"endpoint_id": endpoint, "location": REGION,
                                                      "resource_container": PROJECT}},
            "metricKind": kind, "valueType": "DISTRIBUTION" if distribution else "INT64", "points": points}


def recorded(models: dict, minutes: int = 70, before: tuple = (10, 0, 5.0)) -> list:
    """models: {deployed model id: (predictions, errors, mean latency ms) a minute after the push}; in the 10
    minutes before it, `before` (outside the window: must not count). Another endpoint's series beside them."""
    out = []
    for model, (ok, failed, latency) in models.items():
        rows = [before] * 10 + [(ok, failed, latency)] * minutes
        out.append(_series(PREDICTION_COUNT, model, [r[0] for r in rows]))
        out.append(_series(ERROR_COUNT, model, [r[1] for r in rows]))
        out.append(_series(LATENCIES, model, [(r[0] + r[1], r[2]) for r in rows]))
    out.append(_series(ERROR_COUNT, CANARY_ID, [500] * 80, endpoint="999"))  # the same ids on another endpoint
    return out


@pytest.fixture
def monitoring():
    fake = FakeMonitoring()
    address = fake.start()
    yield fake, fake.client(address)
    fake.stop()


def source(client) -> EndpointMetrics:
    return EndpointMetrics(PROJECT, REGION, ENDPOINT_ID, {"stable": STABLE_ID, "canary": CANARY_ID}, client)


def test_a_canary_as_good_as_stable_is_promoted(monitoring):
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (30, 0, 5.0), CANARY_ID: (10, 0, 5.5)}, before=(10, 9, 50.0))
    decision = decide(source(client), T0, RULES, now=T0 + 3600)
    # 60 minutes in (T0, T0 + 1 h] of 10 a minute; the errors and latency of the 10 minutes before are not counted
    assert decision.action == "promote", decision.why
    assert "600 requests" in decision.why and "0.00% vs stable's 0.00%" in decision.why
    assert "mean latency 5.5 ms vs 5.0 ms" in decision.why
    request = fake.requests[0]
    assert request.filter.startswith(f'metric.type = "{PREDICTION_COUNT}"') and ENDPOINT_ID in request.filter
    assert list(request.aggregation.group_by_fields) == [f"metric.label.{DEPLOYED_MODEL}"]


def test_a_failing_canary_is_rolled_back_saying_why(monitoring):
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (100, 1, 5.0), CANARY_ID: (9, 1, 5.0)})
    decision = decide(source(client), T0, RULES, now=T0 + 3600)
    assert decision.action == "rollback"
    assert decision.why == "canary error rate 10.00% against stable's 0.99% (allowed +1.00%)"


def test_a_slow_canary_is_rolled_back(monitoring):
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (100, 0, 5.0), CANARY_ID: (10, 0, 9.0)})
    decision = decide(source(client), T0, RULES, now=T0 + 3600)
    assert decision.action == "rollback" and "mean latency 9.0 ms against stable's 5.0 ms" in decision.why


def test_too_little_canary_traffic_waits(monitoring):
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (100, 0, 5.0), CANARY_ID: (1, 0, 5.0)})  # 60 in the hour
    decision = decide(source(client), T0, RULES, now=T0 + 3600)
    assert decision.action == "wait" and "fewer than serving.check.min_requests (100)" in decision.why


def test_series_that_cannot_tell_the_deployed_models_apart_stop_the_check(monitoring):
    """deployed_model_id is not confirmed by a source read here: a series without it is no evidence for either."""
    fake, client = monitoring
    fake.series[PROJECT] = [_series(PREDICTION_COUNT, "", [10] * 80, labels={})]
    with pytest.raises(CanaryMetricsError, match="without the metric label deployed_model_id"):
        decide(source(client), T0, RULES, now=T0 + 3600)


def test_a_short_window_still_asks_for_the_minimum_alignment_period(monitoring):
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (100, 0, 5.0), CANARY_ID: (10, 0, 5.0)})
    windows = source(client).windows(T0, T0 + 30)  # 30 s: the period asked is 60 s, the least the API takes
    assert fake.requests[-1].aggregation.alignment_period.total_seconds() == 60
    assert windows["canary"].requests == {"OK": 0.0, "error": 0.0}  # no point ends in (T0, T0 + 30]


def test_refusals_are_errors_naming_the_call(monitoring):
    fake, client = monitoring
    with pytest.raises(CanaryMetricsError, match="Cloud Monitoring refused ListTimeSeries .* has no recorded"):
        source(client).windows(T0, T0 + 3600)
    with pytest.raises(CanaryMetricsError, match="stable and canary are the same deployed model"):
        EndpointMetrics(PROJECT, REGION, ENDPOINT_ID, {"stable": "1", "canary": "1"}, client)
    with pytest.raises(CanaryMetricsError, match='endpoint_id \'1"\''):
        EndpointMetrics(PROJECT, REGION, '1"', {"stable": "1", "canary": "2"}, client)


@pytest.mark.parametrize("change, refused", [
    (lambda r: r.update(filter=""), "filter is required"),
    (lambda r: r.update(filter=r["filter"] + f' AND metric.type = "{ERROR_COUNT}"'), "a single metric type"),
    (lambda r: r.update(name="projects/a/b"), "expected projects/"),
    (lambda r: r["interval"].__setattr__("start_time", r["interval"].end_time), "must be earlier than the end"),
    (lambda r: r["aggregation"].__setattr__("alignment_period", {"seconds": 30}), "at least 60 seconds"),
    (lambda r: r["aggregation"].__setattr__("alignment_period", {}), "alignment_period is required"),
    (lambda r: r["aggregation"].__setattr__("per_series_aligner", 0), "needs a per_series_aligner"),
    (lambda r: r.update(order_by="metric.type"), "order_by"),
])
def test_the_stand_in_refuses_what_the_api_documents(monitoring, change, refused):
    """Each rule on the request the source sends, broken one at a time (sources: tests/fake_monitoring.py)."""
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (1, 0, 5.0), CANARY_ID: (1, 0, 5.0)})
    request = source(client).request(PREDICTION_COUNT, T0, T0 + 3600)
    assert list(client.list_time_series(request=request))  # as the source sends it: answered
    change(request)
    with pytest.raises(exceptions.InvalidArgument, match=refused):
        list(client.list_time_series(request=request))


def test_align_delta_on_a_gauge_is_refused(monitoring):
    fake, client = monitoring
    fake.series[PROJECT] = [_series(PREDICTION_COUNT, STABLE_ID, [1] * 80, kind="GAUGE")]
    with pytest.raises(CanaryMetricsError, match="ALIGN_DELTA is valid for CUMULATIVE and DELTA"):
        source(client).windows(T0, T0 + 3600)
