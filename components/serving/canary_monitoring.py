"""The canary check's Vertex AI source: Cloud Monitoring's series of one endpoint, per deployed model (stable's and
the canary's), read with the google-cloud-monitoring client's ListTimeSeries.
Why and sources: docs/serving.md, "`serving check`"."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Optional

from components.errors import CanaryMetricsError
from components.serving import vertex_endpoint
from components.serving.canary_check import CANARY, OK, STABLE, TRACKS, Window
from components.serving.model_config import Labels

# The metric types and the monitored resource (type and its labels endpoint_id, location) as Google's own Vertex AI
# endpoints dashboard queries them (GoogleCloudPlatform/monitoring-dashboard-samples,
# dashboards/google-vertex-ai/vertex-ai-endpoints.json); their kinds and labels as Google's metric list gives them
# (cloud.google.com/monitoring/api/metrics_gcp_a_b, "aiplatform").
# response_count counts responses, one per request whatever its instances (prediction_count counts instances), by
# response_code, "HTTP response code (1xx, 2xx, 3xx, 4xx, 5xx)": the requests and their errors, non-2xx.
RESPONSE_COUNT = "aiplatform.googleapis.com/prediction/online/response_count"
RESPONSE_CODE = "response_code"
# prediction_latencies has one series per latency_type, "overhead", "model" and "total", all filled for custom-trained
# models: summed over them, each request counts three times and the mean is two thirds of the total. "total" alone.
LATENCIES = "aiplatform.googleapis.com/prediction/online/prediction_latencies"
LATENCY_TYPE, TOTAL = "latency_type", "total"
ENDPOINT = "aiplatform.googleapis.com/Endpoint"
# Which deployed model answered: every one of these metrics has the label (the metric list); a series without it
# stops the check (CanaryMetricsError) rather than be counted for either track.
DEPLOYED_MODEL = "deployed_model_id"
_CODE = re.compile(r"^[1-5]")  # an HTTP status class: 2xx is an answer, any other an error
CALL_TIMEOUT_SECONDS = 60.0
MIN_ALIGNMENT_SECONDS = 60  # Aggregation.alignment_period "must be at least 60 seconds" (common.proto)


@dataclasses.dataclass(frozen=True)
class EndpointMetrics:
    """Endpoint `endpoint_id` in `project`/`region`; `deployed_models`: {stable: id, canary: id}, the endpoint's
    DeployedModel ids (the Vertex endpoint target knows them). `client`: a monitoring_v3.MetricServiceClient, by
    default one with the application's default credentials."""
    project: str
    region: str
    endpoint_id: str
    deployed_models: dict
    client: Optional[object] = None

    def __post_init__(self):
        for name in ("project", "region", "endpoint_id"):
            value = getattr(self, name)
            if not value or '"' in value or "\\" in value:
                raise CanaryMetricsError(f"Cloud Monitoring source: {name} {value!r} is empty or not a plain name")
        if set(self.deployed_models) != set(TRACKS) or not all(self.deployed_models.values()):
            raise CanaryMetricsError(f"Cloud Monitoring source: deployed_models {self.deployed_models} must name the "
                                     f"deployed model of both {STABLE} and {CANARY}")
        if self.deployed_models[STABLE] == self.deployed_models[CANARY]:
            raise CanaryMetricsError(f"Cloud Monitoring source: stable and canary are the same deployed model "
                                     f"{self.deployed_models[STABLE]}")

    def _client(self):
        return self.client if self.client is not None else metric_client()

    def request(self, metric_type: str, since: float, now: float, labels: tuple = ()) -> dict:
        """ListTimeSeries over (since, now]: one aligned point per series, summed per deployed model and per each
        of `labels` (metric labels); for the latencies, their "total" series alone."""
        from google.cloud import monitoring_v3
        from google.protobuf import duration_pb2, timestamp_pb2

        def stamp(t: float) -> timestamp_pb2.Timestamp:
            return timestamp_pb2.Timestamp(seconds=int(t), nanos=int(round((t - int(t)) * 1e9)) % 1_000_000_000)

        period = max(MIN_ALIGNMENT_SECONDS, math.ceil(now - since))
        only_total = f' AND metric.labels.{LATENCY_TYPE} = "{TOTAL}"' if metric_type == LATENCIES else ""
        return {
            "name": f"projects/{self.project}",
            "filter": (f'metric.type = "{metric_type}" AND resource.type = "{ENDPOINT}" AND '
                       f'resource.labels.endpoint_id = "{self.endpoint_id}" AND '
                       f'resource.labels.location = "{self.region}"{only_total}'),
            "interval": monitoring_v3.TimeInterval(start_time=stamp(since), end_time=stamp(now)),
            "aggregation": monitoring_v3.Aggregation(
                alignment_period=duration_pb2.Duration(seconds=period),
                per_series_aligner=monitoring_v3.Aggregation.Aligner.ALIGN_DELTA,
                cross_series_reducer=monitoring_v3.Aggregation.Reducer.REDUCE_SUM,
                group_by_fields=[f"metric.label.{label}" for label in (DEPLOYED_MODEL, *labels)]),
            "view": monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL,
        }

    def _per_model(self, metric_type: str, since: float, now: float, label: str = "") -> dict:
        """{deployed model id: {`label`'s value: [point values]}} of one metric over the window ("" without one)."""
        from google.api_core import exceptions

        try:
            series = list(self._client().list_time_series(
                request=self.request(metric_type, since, now, (label,) if label else ()),
                timeout=CALL_TIMEOUT_SECONDS))
        except exceptions.GoogleAPICallError as e:
            raise CanaryMetricsError(f"Cloud Monitoring refused ListTimeSeries of {metric_type} for endpoint "
                                     f"{self.endpoint_id} in projects/{self.project}: {e}") from None
        out: dict = {}
        for one in series:
            model = one.metric.labels.get(DEPLOYED_MODEL)
            if not model:
                raise CanaryMetricsError(
                    f"Cloud Monitoring returned a series of {metric_type} for endpoint {self.endpoint_id} without the "
                    f"metric label {DEPLOYED_MODEL} (labels {dict(one.metric.labels)}): it can't tell the canary "
                    "from stable, so nothing is decided (docs/serving.md)")
            value = one.metric.labels.get(label, "") if label else ""
            out.setdefault(model, {}).setdefault(value, []).extend(p.value for p in one.points)
        return out

    def windows(self, since: float, now: float) -> dict:
        responses = self._per_model(RESPONSE_COUNT, since, now, RESPONSE_CODE)
        latencies = self._per_model(LATENCIES, since, now)
        out = {}
        for track in TRACKS:
            model = self.deployed_models[track]
            requests = {OK: 0.0}
            for code, values in responses.get(model, {}).items():
                if not _CODE.match(code):
                    raise CanaryMetricsError(f"{RESPONSE_COUNT}: deployed model {model} has a series of "
                                             f"{RESPONSE_CODE} {code!r}, not an HTTP status class: nothing decided")
                key = OK if code.startswith("2") else code
                requests[key] = requests.get(key, 0.0) + sum(_number(v, RESPONSE_COUNT) for v in values)
            latency_sum = latency_count = 0.0
            for value in latencies.get(model, {}).get("", []):
                distribution = _distribution(value)
                latency_sum += distribution.mean * distribution.count
                latency_count += distribution.count
            out[track] = Window(requests, latency_sum, latency_count)
        return out


def for_endpoint(target: vertex_endpoint.Target, base: str, labels: Labels, monitoring_endpoint: str = ""
                 ) -> EndpointMetrics:
    """The series of the endpoint's champion (stable) and challenger (canary) deployed models, as the endpoint
    target recorded them under serving dir `base` and the endpoint confirms; VertexStateMismatch, nothing decided,
    when the endpoint, our record or the TF Serving `labels` disagree. `monitoring_endpoint`: metric_client's."""
    if labels.stable is None or labels.canary is None:
        raise CanaryMetricsError(f"no stable and canary out in {base} (stable {labels.stable}, canary "
                                 f"{labels.canary}): nothing to compare")
    record = vertex_endpoint.agreeing(target, base, labels)  # so it serves both, as champion and challenger
    champion, challenger = record.served(vertex_endpoint.CHAMPION), record.served(vertex_endpoint.CHALLENGER)
    return EndpointMetrics(target.project, target.region, target.endpoint.rsplit("/", 1)[-1],
                           {STABLE: champion.deployed_model_id, CANARY: challenger.deployed_model_id},
                           metric_client(monitoring_endpoint))


def _kind(value) -> str:
    return type(value).pb(value).WhichOneof("value") or ""


def _number(value, metric_type: str) -> float:
    kind = _kind(value)
    if kind not in ("int64_value", "double_value"):
        raise CanaryMetricsError(f"{metric_type}: a point of {kind or 'no'} value, expected a count")
    return float(getattr(value, kind))


def _distribution(value):
    if _kind(value) != "distribution_value":
        raise CanaryMetricsError(f"{LATENCIES}: a point of {_kind(value) or 'no'} value, expected a distribution")
    return value.distribution_value


def metric_client(loopback: str = ""):
    """The MetricServiceClient: Google's, with the application's default credentials; or, given `loopback`
    (127.0.0.1:PORT), one on a plain gRPC channel to a stand-in there."""
    from google.cloud import monitoring_v3

    if not loopback:
        return monitoring_v3.MetricServiceClient()
    if not loopback.startswith("127.0.0.1:"):
        raise CanaryMetricsError(f"Cloud Monitoring source: {loopback!r} is not a loopback address")
    import grpc
    from google.cloud.monitoring_v3.services.metric_service.transports import MetricServiceGrpcTransport

    channel = grpc.insecure_channel(loopback)
    return monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
