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
    LATENCIES,
    RESPONSE_CODE,
    RESPONSE_COUNT,
    EndpointMetrics,
)
from pipeline.sections.serving import CheckSection
from tests.fake_monitoring import FakeMonitoring, series

PROJECT, REGION, ENDPOINT_ID = "my-project", "us-central1", "1234567890"
STABLE_ID, CANARY_ID = "111", "222"
RULES = CheckSection(min_canary_minutes=30, min_requests=100, max_error_rate_increase=0.01,
                     max_latency_ratio=1.5).rules()
T0 = 1_796_000_040.0  # the canary's push
PREDICTION_COUNT = "aiplatform.googleapis.com/prediction/online/prediction_count"
ERROR_COUNT = "aiplatform.googleapis.com/prediction/online/error_count"


def _series(metric: str, model: str, values: list, endpoint: str = ENDPOINT_ID, labels: dict = None) -> dict:
    """A point a minute, from T0 - 10 min on."""
    points = [(T0 + (minute - 10) * 60 + 60, value) for minute, value in enumerate(values)]
    return series(metric, {DEPLOYED_MODEL: model} if labels is None else labels, points, endpoint, REGION, PROJECT)


def traffic(model: str, rows: list, instances: int = 1, endpoint: str = ENDPOINT_ID) -> list:
    """A deployed model's series as Vertex writes them, a row a minute: (answered, failed, mean total latency ms)
    requests of `instances` instances each: response_count by response_code; prediction_latencies' three
    latency types (model 70% of the total, overhead 30%); prediction_count and error_count, which count instances."""
    def latency(kind: str, share: float) -> dict:
        return _series(LATENCIES, model, [(ok + failed, ms * share) for ok, failed, ms in rows], endpoint,
                       {DEPLOYED_MODEL: model, "latency_type": kind})
    return [_series(RESPONSE_COUNT, model, [ok for ok, _, _ in rows], endpoint,
                    {DEPLOYED_MODEL: model, RESPONSE_CODE: "2xx"}),
            _series(RESPONSE_COUNT, model, [failed for _, failed, _ in rows], endpoint,
                    {DEPLOYED_MODEL: model, RESPONSE_CODE: "5xx"}),
            latency("total", 1.0), latency("model", 0.7), latency("overhead", 0.3),
            _series(PREDICTION_COUNT, model, [ok * instances for ok, _, _ in rows], endpoint),
            _series(ERROR_COUNT, model, [failed for _, failed, _ in rows], endpoint)]


def recorded(models: dict, minutes: int = 70, before: tuple = (10, 0, 5.0), instances: int = 1) -> list:
    """models: {deployed model id: (answered, failed, mean latency ms) requests a minute after the push}; in the
    10 minutes before it, `before` (outside the window: must not count). Another endpoint's series beside them."""
    out = []
    for model, row in models.items():
        out += traffic(model, [before] * 10 + [row] * minutes, instances)
    out += traffic(CANARY_ID, [(0, 500, 5.0)] * 80, endpoint="999")  # the same ids on another endpoint
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
    responses, latencies = fake.requests
    assert responses.filter.startswith(f'metric.type = "{RESPONSE_COUNT}"') and ENDPOINT_ID in responses.filter
    assert list(responses.aggregation.group_by_fields) == [f"metric.label.{DEPLOYED_MODEL}",
                                                           f"metric.label.{RESPONSE_CODE}"]
    assert latencies.filter.endswith('AND metric.labels.latency_type = "total"')
    assert list(latencies.aggregation.group_by_fields) == [f"metric.label.{DEPLOYED_MODEL}"]


def test_the_latency_is_the_total_of_each_request_counted_once(monitoring):
    """prediction_latencies has a series per latency_type (overhead, model, total) for a custom-trained model:
    summed over all three, each request counted three times and the mean came out at two thirds of the total."""
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (30, 0, 5.0), CANARY_ID: (10, 0, 7.5)})
    canary = source(client).windows(T0, T0 + 3600)["canary"]
    assert canary.latency_count == canary.total == 600
    assert canary.mean_latency_ms == pytest.approx(7.5)


def test_the_error_rate_and_min_requests_count_requests_not_instances(monitoring):
    """response_count counts responses, one per request; prediction_count counts instances. With 20 instances a
    request, 1 failed request in 10 used to read as 1 error in 181 (0.55%) and pass; and 60 requests as 1,200."""
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (100, 0, 5.0), CANARY_ID: (9, 1, 5.0)}, instances=20)
    decision = decide(source(client), T0, RULES, now=T0 + 3600)
    assert decision.action == "rollback" and decision.why.startswith("canary error rate 10.00% against stable's 0.00%")
    fake.series[PROJECT] = recorded({STABLE_ID: (100, 0, 5.0), CANARY_ID: (1, 0, 5.0)}, instances=20)
    decision = decide(source(client), T0, RULES, now=T0 + 3600)
    assert decision.action == "wait" and "answered 60 requests" in decision.why


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
    fake.series[PROJECT] = [_series(RESPONSE_COUNT, "", [10] * 80, labels={RESPONSE_CODE: "2xx"})]
    with pytest.raises(CanaryMetricsError, match="without the metric label deployed_model_id"):
        decide(source(client), T0, RULES, now=T0 + 3600)


def test_a_short_window_still_asks_for_the_minimum_alignment_period(monitoring):
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (100, 0, 5.0), CANARY_ID: (10, 0, 5.0)})
    windows = source(client).windows(T0, T0 + 30)  # 30 s: the period asked is 60 s, the least the API takes
    assert fake.requests[-1].aggregation.alignment_period.total_seconds() == 60
    assert windows["canary"].requests == {"OK": 0.0}  # no point ends in (T0, T0 + 30]


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
    (lambda r: r["aggregation"].__setattr__("alignment_period", {"seconds": 104 * 7 * 86400 + 60}), "104 weeks"),
    (lambda r: r.update(order_by="metric.type"), "order_by"),
])
def test_the_stand_in_refuses_what_the_api_documents(monitoring, change, refused):
    """Each rule on the request the source sends, broken one at a time (sources: tests/fake_monitoring.py)."""
    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (1, 0, 5.0), CANARY_ID: (1, 0, 5.0)})
    request = source(client).request(RESPONSE_COUNT, T0, T0 + 3600, (RESPONSE_CODE,))
    assert list(client.list_time_series(request=request))  # as the source sends it: answered
    change(request)
    with pytest.raises(exceptions.InvalidArgument, match=refused):
        list(client.list_time_series(request=request))


def test_align_delta_on_a_gauge_is_refused(monitoring):
    fake, client = monitoring
    replicas = "aiplatform.googleapis.com/prediction/online/replicas"  # GAUGE in the metric list
    fake.series[PROJECT] = [_series(replicas, STABLE_ID, [1] * 80)]
    with pytest.raises(exceptions.InvalidArgument, match="ALIGN_DELTA is valid for CUMULATIVE and DELTA"):
        list(client.list_time_series(request=source(client).request(replicas, T0, T0 + 3600)))


def test_the_stand_in_answers_only_from_series_as_the_metric_list_describes_them(monitoring):
    """A latency series without the "total" the list says is always there, or a label the metric does not have,
    is refused: the tests cannot feed the source what Vertex never writes."""
    fake, client = monitoring
    fake.series[PROJECT] = [_series(LATENCIES, STABLE_ID, [(1, 5.0)] * 80,
                                    labels={DEPLOYED_MODEL: STABLE_ID, "latency_type": "model"})]
    with pytest.raises(CanaryMetricsError, match="no latency_type='total'"):
        source(client).windows(T0, T0 + 3600)
    fake.series[PROJECT] = [_series(RESPONSE_COUNT, STABLE_ID, [1] * 80,
                                    labels={DEPLOYED_MODEL: STABLE_ID, RESPONSE_CODE: "200"})]
    with pytest.raises(CanaryMetricsError, match="label response_code='200' is not one the metric list gives"):
        source(client).windows(T0, T0 + 3600)


def test_without_a_label_history_the_window_starts_at_the_canarys_push_in_its_record(monitoring, tmp_path):
    """A models.config written by hand, or a history lost: the window used to start at 0 (1970), which Cloud
    Monitoring refuses (an alignment period over 104 weeks); the canary's training record says when it was pushed."""
    import json

    from components import training_record
    from components.errors import RolloutError
    from components.serving import model_config, serving_dir
    from components.serving.canary_check import judge
    from components.serving.model_config import Labels

    fake, client = monitoring
    fake.series[PROJECT] = recorded({STABLE_ID: (30, 0, 5.0), CANARY_ID: (10, 0, 5.5)})
    base = tmp_path / "serving"
    for version in (1, 2):
        (base / str(version)).mkdir(parents=True)
        (base / str(version) / serving_dir.SAVED_MODEL).write_text("graph")
    model_config.write(str(base), "m", Labels(1, 2), None)  # no .rollout/ history

    def judged():
        return judge(str(base), lambda labels: source(client), RULES, now=T0 + 3600)
    with pytest.raises(RolloutError, match="neither the label history .* nor its training record"):
        judged()
    record = base / training_record.RECORDS_DIR / "2" / training_record.RECORD_FILE
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"version": "2", "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0))}))
    line, decision = judged()
    assert decision.action == "promote" and "over 60 min and 600 requests" in decision.why, line
    assert fake.requests[-1].interval.start_time.timestamp() == T0
