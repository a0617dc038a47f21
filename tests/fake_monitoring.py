"""A Cloud Monitoring stand-in on 127.0.0.1 for the real google-cloud-monitoring client: the one call the canary
check makes, google.monitoring.v3.MetricService/ListTimeSeries, over gRPC (the client library has no REST
transport, 2.29.1 as pinned nor 2.32.0, the newest on PyPI), answering from series in the API's JSON form
(TimeSeries as projects.timeSeries.list returns them).

What it refuses, as the API documents it (google/monitoring/v3/metric_service.proto and common.proto in
googleapis/googleapis, as the pinned client's monitoring_v3/types/{metric_service,common}.py carry them; the
filter grammar: cloud.google.com/monitoring/api/v3/filters), each with INVALID_ARGUMENT naming the field:
- `name` must be projects/[PROJECT_ID_OR_NUMBER] (organizations/ and folders/ are valid there but not served:
  UNIMPLEMENTED).
- `filter` is required and "must specify a single metric type": exactly one metric.type term.
- `interval` is required; for reads it is (startTime, endTime], and "the start time must be specified, must be
  earlier than the end time" (TimeInterval).
- `aggregation.alignment_period` "must be at least 60 seconds" and is required with any aligner but ALIGN_NONE;
  "The maximum value of the alignment_period is 104 weeks (2 years) for charts, and 90,000 seconds (25 hours) for
  alerting policies" (common.proto, Aggregation.alignment_period): beyond 104 weeks is refused;
  a cross_series_reducer needs an aligner other than ALIGN_NONE and an alignment period; ALIGN_DELTA "is valid for
  CUMULATIVE and DELTA metrics" (not GAUGE).
- `order_by` "Unsupported: must be left blank"; `secondary_aggregation` "may only be specified if aggregation is
  specified".
Where it is stricter than the service, failing closed: a project without recorded series is NOT_FOUND (what the
service answers for a project the caller can't read was not checked); a filter is only `selector = "value"` terms
joined by AND (the service also takes OR, NOT, one_of, starts_with, ...); selectors are metric.type, resource.type
and metric./resource.label(s).KEY; group_by_fields only metric.label.KEY / resource.label.KEY; only the aligners
ALIGN_NONE and ALIGN_DELTA and the reducers REDUCE_NONE and REDUCE_SUM are implemented, and no paging (a page_size
smaller than the answer): each UNIMPLEMENTED. An alignment period with no points gets no point here (the service
interpolates one); with one period over the whole window, as the check asks, that does not arise.

The series it answers from are checked against the metric's descriptor as Google's metric list gives it
(DESCRIPTORS: kind, value type, labels and their values), so a test cannot feed it series the service would never
write; a series that breaks its descriptor fails the call with INTERNAL naming the rule.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

import grpc
from google.api import distribution_pb2, metric_pb2, monitored_resource_pb2
from google.cloud import monitoring_v3

from tests.fake_grpc import serve

_LIST = "/google.monitoring.v3.MetricService/ListTimeSeries"
_NAME = re.compile(r"^projects/([^/]+)$")
_TERM = re.compile(r'^\s*([A-Za-z_.]+(?:"[^"]+"|[A-Za-z0-9_]+)?)\s*=\s*"([^"\\]*)"\s*$')
_SELECTOR = re.compile(r'^(metric|resource)\.(type|labels?\.(?:"([^"]+)"|([A-Za-z0-9_]+)))$')
_GROUP = re.compile(r'^(metric|resource)\.label\.(?:"([^"]+)"|([A-Za-z0-9_]+))$')
Aligner, Reducer = monitoring_v3.Aggregation.Aligner, monitoring_v3.Aggregation.Reducer
_GAUGE, _DELTA = 1, 2  # google.api.MetricDescriptor.MetricKind
_MAX_ALIGNMENT_SECONDS = 104 * 7 * 86400  # common.proto, Aggregation.alignment_period: "104 weeks (2 years)"


@dataclass(frozen=True)
class Descriptor:
    kind: str          # DELTA | GAUGE | CUMULATIVE
    value_type: str    # INT64 | DOUBLE | DISTRIBUTION
    labels: dict       # label -> a regular expression its values match


# The Vertex AI endpoint metrics (monitored resource aiplatform.googleapis.com/Endpoint) as Google's metric list
# gives them: cloud.google.com/monitoring/api/metrics_gcp_a_b, "aiplatform" (the list generated 2026-04-10).
# - prediction_latencies: DELTA, DISTRIBUTION, ms; latency_type is "One of the following "overhead", "model" or
#   "total". The "total" latency type will always be populated. And the "overhead" and "model" latency type only
#   get populated for custom-trained models and AutoML tabular models."
# - response_count: DELTA, INT64; "Number of different online prediction response codes"; response_code is the
#   "HTTP response code (1xx, 2xx, 3xx, 4xx, 5xx)".
# - prediction_count ("Number of online predictions") and error_count ("Number of online prediction errors"):
#   DELTA, INT64. The Vertex console's "Predictions per second" counts each instance of a request
#   (cloud.google.com/vertex-ai/docs/general/monitoring-metrics).
# - replicas: GAUGE, INT64 ("Number of active replicas used by the deployed model").
# Every one has deployed_model_id ("The ID of the DeployedModel which serves the prediction request"), spot,
# model_display_name and endpoint_display_name, except that replicas has no response or latency label.
_AIPLATFORM = "aiplatform.googleapis.com/prediction/online/"
_COMMON = {"deployed_model_id": r"[0-9]+", "spot": r"True|False", "model_display_name": r".*",
           "endpoint_display_name": r".*"}
DESCRIPTORS = {
    _AIPLATFORM + "prediction_latencies": Descriptor("DELTA", "DISTRIBUTION",
                                                     {**_COMMON, "latency_type": r"overhead|model|total"}),
    _AIPLATFORM + "response_count": Descriptor("DELTA", "INT64", {**_COMMON, "response_code": r"[1-5]xx"}),
    _AIPLATFORM + "prediction_count": Descriptor("DELTA", "INT64", _COMMON),
    _AIPLATFORM + "error_count": Descriptor("DELTA", "INT64", _COMMON),
    _AIPLATFORM + "replicas": Descriptor("GAUGE", "INT64", _COMMON),
}
# A label value the list says "will always be populated": a deployed model's latencies always include it.
_ALWAYS = {_AIPLATFORM + "prediction_latencies": ("latency_type", "total")}


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def series(metric: str, labels: dict, points: list, endpoint_id: str, location: str, project: str) -> dict:
    """One series of a Vertex AI endpoint as projects.timeSeries.list returns it (JSON), its kind and value type
    from DESCRIPTORS; `points`: [(end time, value)], each a minute long, a value a count or, for a distribution,
    (count, mean)."""
    descriptor = DESCRIPTORS[metric]
    out = []
    for end, value in points:
        interval = {"endTime": _rfc3339(end)}
        if descriptor.kind != "GAUGE":
            interval["startTime"] = _rfc3339(end - 60)
        out.append({"interval": interval,
                    "value": ({"distributionValue": {"count": str(value[0]), "mean": value[1]}}
                              if descriptor.value_type == "DISTRIBUTION" else {"int64Value": str(value)})})
    return {"metric": {"type": metric, "labels": labels},
            "resource": {"type": "aiplatform.googleapis.com/Endpoint",
                         "labels": {"endpoint_id": endpoint_id, "location": location, "resource_container": project}},
            "metricKind": descriptor.kind, "valueType": descriptor.value_type, "points": out}


class Refused(Exception):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code


def _bad(message: str) -> Refused:
    return Refused(grpc.StatusCode.INVALID_ARGUMENT, message)


def _seconds(value) -> float:
    """A Timestamp or Duration in seconds: raw protobuf, or as proto-plus gives them (datetime, timedelta)."""
    if hasattr(value, "total_seconds"):
        return value.total_seconds()
    if hasattr(value, "timestamp"):
        return value.timestamp()
    return value.seconds + value.nanos / 1e9


@dataclass
class FakeMonitoring:
    """series: {project: [TimeSeries as the API's JSON]}; requests: every ListTimeSeries request it answered."""
    series: dict = field(default_factory=dict)
    requests: list = field(default_factory=list)

    def start(self) -> str:
        self._server, address = serve(_Handler(self), workers=2)
        return address

    def stop(self) -> None:
        self._server.stop(grace=None)

    def client(self, address: str):
        """The real client, its gRPC transport on an insecure channel to the stand-in."""
        from components.serving.canary_monitoring import metric_client

        return metric_client(address)

    def list_time_series(self, pb_request, context):
        request = monitoring_v3.ListTimeSeriesRequest.wrap(pb_request)
        try:
            answer = self._answer(request, pb_request)
        except Refused as e:
            context.abort(e.code, str(e))
        self.requests.append(request)
        return monitoring_v3.ListTimeSeriesResponse.pb(answer)

    def _answer(self, request, pb):
        name = _NAME.match(request.name)
        if not name:
            if request.name.startswith(("organizations/", "folders/")):
                raise Refused(grpc.StatusCode.UNIMPLEMENTED, f"name {request.name}: the stand-in serves projects")
            raise _bad(f"name {request.name!r}: expected projects/[PROJECT_ID_OR_NUMBER]")
        if name.group(1) not in self.series:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"{request.name} has no recorded series")
        terms = _filter(request.filter)
        start, end = _interval(pb)
        if request.order_by:
            raise _bad("order_by: unsupported, must be left blank")
        if pb.HasField("secondary_aggregation"):
            if not pb.HasField("aggregation"):
                raise _bad("secondary_aggregation may only be specified if aggregation is specified")
            raise Refused(grpc.StatusCode.UNIMPLEMENTED, "secondary_aggregation is not implemented by the stand-in")
        if request.page_token:
            raise _bad(f"page_token {request.page_token!r} was not issued")
        recorded = [monitoring_v3.TimeSeries.from_json(json.dumps(raw)) for raw in self.series[name.group(1)]]
        _check_recorded(recorded)
        chosen = []
        for one in recorded:
            if all(_select(one, selector) == value for selector, value in terms):
                points = [p for p in one.points if start < _seconds(p.interval.end_time) <= end]
                if points:
                    chosen.append((one, points))
        if pb.HasField("aggregation"):
            chosen = _aggregate(request.aggregation, chosen, start, end)
        out = []
        for one, points in chosen:
            one = monitoring_v3.TimeSeries(metric=one.metric, resource=one.resource, metric_kind=one.metric_kind,
                                           value_type=one.value_type)
            if request.view == monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL:
                # "returned in reverse time order (most recent to oldest)" (order_by)
                one.points.extend(sorted(points, key=lambda p: -_seconds(p.interval.end_time)))
            out.append(one)
        if request.page_size and sum(len(s.points) for s in out) > request.page_size:
            raise Refused(grpc.StatusCode.UNIMPLEMENTED, "paging is not implemented by the stand-in")
        return monitoring_v3.ListTimeSeriesResponse(time_series=out)


def _check_recorded(recorded: list) -> None:
    """The series a test recorded, held to their metric's descriptor (DESCRIPTORS): what the service never writes
    is no evidence of what our code would do with what it does write."""
    kinds = {1: "GAUGE", 2: "DELTA", 3: "CUMULATIVE"}
    types = {2: "INT64", 3: "DOUBLE", 5: "DISTRIBUTION"}
    always: dict = {}
    for one in recorded:
        metric = one.metric.type
        descriptor = DESCRIPTORS.get(metric)
        if descriptor is None:
            raise Refused(grpc.StatusCode.INTERNAL, f"recorded series of {metric}: not a metric the stand-in knows")
        shape = (kinds.get(int(one.metric_kind)), types.get(int(one.value_type)))
        if shape != (descriptor.kind, descriptor.value_type):
            raise Refused(grpc.StatusCode.INTERNAL, f"recorded series of {metric} is {shape}; the metric list says "
                                                    f"{(descriptor.kind, descriptor.value_type)}")
        labels = dict(one.metric.labels)
        for label, value in labels.items():
            if label not in descriptor.labels or not re.fullmatch(descriptor.labels[label], value):
                raise Refused(grpc.StatusCode.INTERNAL, f"recorded series of {metric}: label {label}={value!r} is "
                                                        "not one the metric list gives")
        if metric in _ALWAYS and "deployed_model_id" in labels:
            label, _ = _ALWAYS[metric]
            key = (metric, one.resource.labels.get("endpoint_id", ""), labels["deployed_model_id"])
            always.setdefault(key, set()).add(labels.get(label))
    for (metric, endpoint, model), values in always.items():
        label, value = _ALWAYS[metric]
        if value not in values:
            raise Refused(grpc.StatusCode.INTERNAL, f"recorded series of {metric} for deployed model {model} on "
                                                    f"endpoint {endpoint}: no {label}={value!r}, which the metric "
                                                    "list says is always populated")


def _filter(text: str) -> list:
    if not text.strip():
        raise _bad("filter is required")
    terms = []
    for part in re.split(r"\s+AND\s+", text.strip()):
        term = _TERM.match(part)
        if not term:
            raise Refused(grpc.StatusCode.UNIMPLEMENTED,
                          f"filter term {part!r}: the stand-in takes only selector = \"value\" terms joined by AND")
        if not _SELECTOR.match(term.group(1)):
            raise _bad(f"filter term {part!r}: unknown selector {term.group(1)}")
        terms.append((term.group(1), term.group(2)))
    if [s for s, _ in terms].count("metric.type") != 1:
        raise _bad(f"filter {text!r} must specify a single metric type")
    return terms


def _select(one, selector: str) -> str:
    kind, what, quoted, bare = _SELECTOR.match(selector).groups()
    where = one.metric if kind == "metric" else one.resource
    return where.type if what == "type" else where.labels.get(quoted or bare, "")


def _interval(pb) -> tuple:
    if not pb.HasField("interval") or not pb.interval.HasField("end_time"):
        raise _bad("interval.end_time is required")
    if not pb.interval.HasField("start_time"):
        raise _bad("interval.start_time: for reads the start time must be specified")
    start, end = _seconds(pb.interval.start_time), _seconds(pb.interval.end_time)
    if not start < end:
        raise _bad(f"interval: the start time {start} must be earlier than the end time {end}")
    return start, end


def _aggregate(aggregation, chosen: list, start: float, end: float) -> list:
    aligner, reducer = aggregation.per_series_aligner, aggregation.cross_series_reducer
    period = _seconds(aggregation.alignment_period)
    if aligner not in (Aligner.ALIGN_NONE, Aligner.ALIGN_DELTA):
        raise Refused(grpc.StatusCode.UNIMPLEMENTED, f"per_series_aligner {aligner.name} is not implemented")
    if reducer not in (Reducer.REDUCE_NONE, Reducer.REDUCE_SUM):
        raise Refused(grpc.StatusCode.UNIMPLEMENTED, f"cross_series_reducer {reducer.name} is not implemented")
    if reducer != Reducer.REDUCE_NONE and aligner == Aligner.ALIGN_NONE:
        raise _bad("aggregation: a cross_series_reducer needs a per_series_aligner other than ALIGN_NONE")
    if aligner == Aligner.ALIGN_NONE:
        return chosen
    if not period:
        raise _bad("aggregation.alignment_period is required with a per_series_aligner other than ALIGN_NONE")
    if period < 60:
        raise _bad(f"aggregation.alignment_period {period:g}s: the value must be at least 60 seconds")
    if period > _MAX_ALIGNMENT_SECONDS:
        raise _bad(f"aggregation.alignment_period {period:g}s: the maximum is 104 weeks (2 years)")
    aligned = []
    for one, points in chosen:
        if one.metric_kind == _GAUGE:
            raise _bad(f"ALIGN_DELTA is valid for CUMULATIVE and DELTA metrics; {one.metric.type} is GAUGE")
        buckets: dict = {}
        for p in points:  # periods (end - (k+1)P, end - kP]
            k = int((end - _seconds(p.interval.end_time)) // period)
            buckets.setdefault(k, []).append(p.value)
        aligned.append((one, [_point(end - (k + 1) * period, end - k * period, values)
                              for k, values in buckets.items()]))
    if reducer == Reducer.REDUCE_NONE:
        return aligned
    keys = []
    for field_name in aggregation.group_by_fields:
        group = _GROUP.match(field_name)
        if not group:
            raise _bad(f"group_by_fields {field_name!r}: expected metric.label.KEY or resource.label.KEY")
        keys.append((group.group(1), group.group(2) or group.group(3)))
    groups: dict = {}
    for one, points in aligned:
        labels = tuple((one.metric if kind == "metric" else one.resource).labels.get(k, "") for kind, k in keys)
        groups.setdefault((one.resource.type, labels), []).append((one, points))
    out = []
    for (resource_type, labels), members in groups.items():
        first = members[0][0]
        kept = {"metric": {}, "resource": {}}
        for (kind, key), value in zip(keys, labels):
            if value:
                kept[kind][key] = value
        reduced = monitoring_v3.TimeSeries(  # DELTA after ALIGN_DELTA
            metric=metric_pb2.Metric(type=first.metric.type, labels=kept["metric"]),
            resource=monitored_resource_pb2.MonitoredResource(type=resource_type, labels=kept["resource"]),
            metric_kind=_DELTA, value_type=first.value_type)
        by_end: dict = {}
        for _, points in members:
            for p in points:
                by_end.setdefault(_seconds(p.interval.end_time), (p, []))[1].append(p.value)
        out.append((reduced, [_point(_seconds(p.interval.start_time), when, values)
                              for when, (p, values) in by_end.items()]))
    return out


def _point(start: float, end: float, values: list):
    from google.protobuf import timestamp_pb2

    def stamp(t):
        return timestamp_pb2.Timestamp(seconds=int(t), nanos=int(round((t - int(t)) * 1e9)) % 1_000_000_000)
    point = monitoring_v3.Point(interval=monitoring_v3.TimeInterval(start_time=stamp(start), end_time=stamp(end)))
    kinds = {type(v).pb(v).WhichOneof("value") for v in values}
    if kinds == {"int64_value"}:
        point.value.int64_value = sum(v.int64_value for v in values)
    elif kinds == {"double_value"}:
        point.value.double_value = sum(v.double_value for v in values)
    elif kinds == {"distribution_value"}:
        count = sum(v.distribution_value.count for v in values)
        total = sum(v.distribution_value.mean * v.distribution_value.count for v in values)
        point.value.distribution_value = distribution_pb2.Distribution(count=count, mean=total / count if count else 0)
    else:
        raise Refused(grpc.StatusCode.UNIMPLEMENTED, f"summing points of {sorted(kinds)} is not implemented")
    return point


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, fake: FakeMonitoring):
        self.fake = fake

    def service(self, details):
        if details.method == _LIST:
            return grpc.unary_unary_rpc_method_handler(
                self.fake.list_time_series, monitoring_v3.ListTimeSeriesRequest.pb().FromString,
                lambda message: message.SerializeToString())

        def unimplemented(request, context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{details.method} is not served by the stand-in")
        return grpc.unary_unary_rpc_method_handler(unimplemented, lambda b: b, lambda b: b)
