"""A stand-in for the Kubeflow Pipelines 2.x API server (v2beta1 REST) on 127.0.0.1, for the
real kfp.Client.

It parses every request body with the official generated models (kfp_server_api, the
package kfp.Client itself uses) and answers as the server does, for the calls our CLI makes.
Each rule below names its source in kubeflow/pipelines (backend/api/v2beta1/*.proto and
swagger/*.json for fields; backend/src/apiserver for behaviour):

- JSON uses the proto field names and an unknown field is an error (400): the gateway's
  marshaler has UseProtoNames: true, DiscardUnknown: false (backend/src/apiserver/common/
  utils.go). The generated client reads responses by those names (kfp_server_api models'
  attribute_map), so a camelCase answer would silently read as empty: we answer snake_case.
- Errors are a google.rpc.Status body {code, message, details} (swagger: googlerpcStatus),
  with the HTTP status of the gRPC code (grpc-gateway): 400 invalid argument, 401
  unauthenticated, 404 not found.
- With a token set, every call needs `Authorization: Bearer <token>`, else 401
  (backend/src/apiserver/auth/authenticator_token_review.go, GetUserIdentity; header and
  prefix in backend/src/apiserver/common/const.go).
- GET /apis/v2beta1/healthz answers {commit_sha, tag_name, multi_user}: not the proto's GetHealthzResponse
  (multi_user only) but the server's own HTTP handler (backend/src/apiserver/main.go, healthzResponse;
  TAG_NAME is the release, "unknown" when unset).
- Experiments: created with display_name and namespace; listed with a JSON filter on
  display_name EQUALS (experiment.proto; filter.proto), which kfp.Client.get_experiment sends.
- A run (run.proto, Run) carries pipeline_spec as a Struct: the server parses it strictly as
  a PipelineSpec, refuses a schema version other than 2.1.0, an empty or malformed
  pipeline_info.name and a missing root (backend/src/apiserver/template/v2_template.go,
  NewV2SpecTemplate); an experiment_id must exist. A new run is PENDING (RuntimeState).
  With a platform spec, kfp.Client sends {pipeline_spec, platform_spec} (kfp/client/client.py, _PipelineDoc.to_dict),
  which the server splits into the two documents (backend/src/apiserver/server/api_util.go,
  pipelineSpecStructToYamlString, 2.5.0) and parses the second strictly as a PlatformSpec ("cannot unmarshal
  platform specific configs", v2_template.go); `platform_specs` keeps each one received.
- A recurring run (recurring_run.proto): max_concurrency 1..10 and a cron that robfig/cron
  v1.2.0's Parse accepts: 5 or 6 fields, seconds first, no time zone
  (backend/src/apiserver/server/api_converter.go, toModelJob; go.mod pins robfig/cron v1.2.0;
  its parser.go defaultParser = Second|Minute|Hour|Dom|Month|DowOptional|Descriptor).
  mode ENABLE gives status ENABLED and DISABLE gives DISABLED (RecurringRun.Mode/Status);
  :enable / :disable switch both and answer {}; DELETE removes it and answers {}; GET of an
  unknown id is 404.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Optional

import kfp_server_api

from tests.fake_http import JsonServer, Request

_NOW = "2026-12-01T08:00:00Z"
_API = "/apis/v2beta1"
_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_GRPC = {400: 3, 401: 16, 404: 5, 409: 6, 500: 13}
# robfig/cron v1.2.0 parser.go bounds; day of week is 0-6 (no 7).
_CRON_BOUNDS = [(0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]
_CRON_NAMES = {4: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
               5: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]}


class BadRequest(Exception):
    pass



@dataclass
class FakeKfp(JsonServer):
    token: Optional[str] = None
    multi_user: bool = False
    tag_name: str = "2.5.0"
    requests: list[Request] = field(default_factory=list)
    experiments: dict[str, dict] = field(default_factory=dict)
    runs: dict[str, dict] = field(default_factory=dict)
    recurring_runs: dict[str, dict] = field(default_factory=dict)
    platform_specs: list[dict] = field(default_factory=list)
    # States a run walks through on successive GETs (RuntimeState); the last one sticks.
    run_states: list[str] = field(default_factory=lambda: ["RUNNING", "SUCCEEDED"])
    run_error: str = ""

    def sent(self, method: str, path_regex: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.search(path_regex, r.path)]

    def _dispatch(self, method, path, query, body, headers):
        request = Request(method, path, query, body, headers)
        self.requests.append(request)
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return self.error(401, "Request header error: there is no user identity header.")
        routes = [
            ("GET", r"/healthz$", lambda r, m: (200, {"commit_sha": "unknown", "tag_name": self.tag_name,
                                                      "multi_user": self.multi_user})),
            ("POST", r"/experiments$", self._create_experiment),
            ("GET", r"/experiments$", self._list_experiments),
            ("POST", r"/runs$", self._create_run),
            ("GET", r"/runs/(?P<id>[^/:]+)$", self._get_run),
            ("POST", r"/recurringruns$", self._create_recurring_run),
            ("GET", r"/recurringruns$", self._list_recurring_runs),
            ("GET", r"/recurringruns/(?P<id>[^/:]+)$", self._get("recurring_runs", "recurring_run_id")),
            ("POST", r"/recurringruns/(?P<id>[^/:]+):enable$", self._switch("ENABLE", "ENABLED")),
            ("POST", r"/recurringruns/(?P<id>[^/:]+):disable$", self._switch("DISABLE", "DISABLED")),
            ("DELETE", r"/recurringruns/(?P<id>[^/:]+)$", self._delete_recurring_run),
        ]
        for verb, regex, handler in routes:
            m = re.match(_API + regex, path)
            if verb == method and m:
                try:
                    return handler(request, m)
                except BadRequest as e:
                    return self.error(400, str(e))
        return self.error(404, f"no route {method} {path}")

    @staticmethod
    def error(status: int, message: str) -> tuple[int, dict]:
        return status, {"code": _GRPC[status], "message": message, "details": []}

    # ---------------------------------------------------------------- parsing with the generated models

    @staticmethod
    def parse(body: dict, model: str):
        """The body as kfp_server_api's `model`; a field the proto does not have is a 400, as the
        server's DiscardUnknown: false makes it."""
        _check_fields(body, model, model)
        client = kfp_server_api.ApiClient()
        return client.deserialize(SimpleNamespace(data=json.dumps(body)), model)

    # ---------------------------------------------------------------- experiments

    def _create_experiment(self, r, m):
        exp = self.parse(r.body, "V2beta1Experiment")
        if not exp.display_name:
            raise BadRequest("Experiment name is empty. Please specify a valid experiment name.")
        if any(e["display_name"] == exp.display_name and e.get("namespace", "") == (exp.namespace or "")
               for e in self.experiments.values()):
            return self.error(409, f"experiment {exp.display_name!r} already exists")
        exp_id = str(uuid.uuid4())
        self.experiments[exp_id] = {"experiment_id": exp_id, "display_name": exp.display_name,
                                    "namespace": exp.namespace or "", "created_at": _NOW,
                                    "storage_state": "AVAILABLE"}
        return 200, self.experiments[exp_id]

    def _list_experiments(self, r, m):
        found = list(self.experiments.values())
        for predicate in json.loads(r.query.get("filter", ["{}"])[0]).get("predicates", []):
            # protojson reads an enum by name or number (filter.proto: EQUALS = 1); kfp.Client sends 1.
            if predicate.get("key") != "display_name" or predicate.get("operation") not in ("EQUALS", 1):
                raise BadRequest(f"unsupported filter predicate {predicate}")
            found = [e for e in found if e["display_name"] == predicate.get("string_value",
                                                                              predicate.get("stringValue"))]
        if "namespace" in r.query:
            found = [e for e in found if e["namespace"] == r.query["namespace"][0]]
        return 200, {"experiments": found, "total_size": len(found)} if found else {}

    # ---------------------------------------------------------------- runs

    def _create_run(self, r, m):
        run = self.parse(r.body, "V2beta1Run")
        if not run.display_name:
            raise BadRequest("The run name is empty. Please specify a valid name")
        self._check_spec(run.pipeline_spec)
        self._check_experiment(run.experiment_id)
        run_id = str(uuid.uuid4())
        self.runs[run_id] = {**r.body, "run_id": run_id, "state": "PENDING", "created_at": _NOW,
                             "storage_state": "AVAILABLE"}
        return 200, self.runs[run_id]

    def _check_experiment(self, experiment_id):
        if experiment_id and experiment_id not in self.experiments:
            raise BadRequest(f"experiment {experiment_id} not found")

    def _check_spec(self, spec: Optional[dict]) -> None:
        from google.protobuf import json_format
        from kfp.pipeline_spec import pipeline_spec_pb2

        if not spec:
            raise BadRequest("Failed to create a run: neither pipeline_spec nor pipeline_version_reference is set")
        if "pipeline_spec" in spec:
            platform = spec.get("platform_spec")
            if platform is not None:
                try:
                    json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())
                except json_format.ParseError as e:
                    raise BadRequest(f"cannot unmarshal platform specific configs: {e}") from None
                self.platform_specs.append(platform)
            spec = spec["pipeline_spec"]
        parsed = pipeline_spec_pb2.PipelineSpec()
        try:
            json_format.ParseDict(spec, parsed)  # strict, as protojson.Unmarshal there
        except json_format.ParseError as e:
            raise BadRequest(f"invalid v2 pipeline spec: {e}") from None
        if parsed.schema_version != "2.1.0":
            raise BadRequest(f"KFP only supports schema version 2.1.0, but the pipeline spec has version "
                             f"{parsed.schema_version}")
        if not parsed.pipeline_info.name or not _NAME_RE.search(parsed.pipeline_info.name):
            raise BadRequest("invalid v2 pipeline spec: name is empty or malformed")
        if not parsed.HasField("root"):
            raise BadRequest("invalid v2 pipeline spec: root component is empty")

    def _get_run(self, r, m):
        run = self.runs.get(m["id"])
        if run is None:
            return self.error(404, f"run {m['id']} not found")
        seen = run.setdefault("_gets", 0)
        run["_gets"] = seen + 1
        state = self.run_states[min(seen, len(self.run_states) - 1)]
        answer = {k: v for k, v in run.items() if k != "_gets"} | {"state": state}
        if state == "FAILED" and self.run_error:
            answer["error"] = {"code": 13, "message": self.run_error}
        return 200, answer

    def _get(self, table: str, key: str):
        def get(r, m):
            item = getattr(self, table).get(m["id"])
            return (200, item) if item else self.error(404, f"{key} {m['id']} not found")
        return get

    # ---------------------------------------------------------------- recurring runs

    def _create_recurring_run(self, r, m):
        job = self.parse(r.body, "V2beta1RecurringRun")
        if not job.display_name:
            raise BadRequest("The recurring run name is empty")
        self._check_spec(job.pipeline_spec)
        self._check_experiment(job.experiment_id)
        concurrency = int(job.max_concurrency or 0)
        if not 1 <= concurrency <= 10:
            raise BadRequest(f"Max concurrency of a recurring run must be at least 1 and at most 10. "
                             f"Received {concurrency}")
        cron = job.trigger.cron_schedule.cron if job.trigger and job.trigger.cron_schedule else None
        if cron is None:
            raise BadRequest("stand-in: only cron triggers are modelled")
        _robfig_v1_parse(cron)
        mode = job.mode or "MODE_UNSPECIFIED"
        if mode not in kfp_server_api.RecurringRunMode.allowable_values:
            raise BadRequest(f'invalid value for enum field mode: "{mode}"')
        job_id = str(uuid.uuid4())
        self.recurring_runs[job_id] = {
            # int64 is a JSON string in protojson (recurring_run.proto: int64 max_concurrency).
            **r.body, "max_concurrency": str(concurrency), "recurring_run_id": job_id, "created_at": _NOW,
            "updated_at": _NOW,
            "status": {"ENABLE": "ENABLED", "DISABLE": "DISABLED"}.get(mode, "STATUS_UNSPECIFIED")}
        return 200, self.recurring_runs[job_id]

    def _list_recurring_runs(self, r, m):
        found = list(self.recurring_runs.values())
        if "experiment_id" in r.query:
            found = [j for j in found if j.get("experiment_id") == r.query["experiment_id"][0]]
        if "namespace" in r.query:
            found = [j for j in found if j.get("namespace", "") == r.query["namespace"][0]]
        # The proto field is named recurringRuns (recurring_run.proto, ListRecurringRunsResponse), so
        # that is its JSON name too under UseProtoNames.
        return 200, {"recurringRuns": found, "total_size": len(found)} if found else {}

    def _switch(self, mode: str, status: str):
        def switch(r, m):
            job = self.recurring_runs.get(m["id"])
            if job is None:
                return self.error(404, f"recurring run {m['id']} not found")
            job.update(mode=mode, status=status, updated_at=_NOW)
            return 200, {}
        return switch

    def _delete_recurring_run(self, r, m):
        if self.recurring_runs.pop(m["id"], None) is None:
            return self.error(404, f"recurring run {m['id']} not found")
        return 200, {}


def _check_fields(body, model: str, where: str) -> None:
    cls = getattr(kfp_server_api.models, model, None)
    if cls is None or not isinstance(body, dict):
        return
    by_json = {json_name: cls.openapi_types[attr] for attr, json_name in cls.attribute_map.items()}
    for key, value in body.items():
        if key not in by_json:
            raise BadRequest(f'unknown field "{key}" in {where}')
        if by_json[key].startswith("V2beta1") or by_json[key].startswith("Googlerpc"):
            _check_fields(value, by_json[key], f"{where}.{key}")


def _robfig_v1_parse(cron: str) -> None:
    """robfig/cron v1.2.0 Parse: '@' descriptors, or 5-6 fields with seconds first."""
    if cron.startswith("@"):
        return
    fields = cron.split()
    if not 5 <= len(fields) <= 6:
        raise BadRequest("Schedule cron is not a supported format(https://godoc.org/github.com/robfig/cron). "
                         f"Error: Expected 5 to 6 fields, found {len(fields)}: {cron}")
    for i, value in enumerate(fields):
        lo, hi = _CRON_BOUNDS[i]
        for item in value.split(","):
            rng, _, step = item.partition("/")
            if rng in ("*", "?"):
                continue
            for token in rng.split("-"):
                names = _CRON_NAMES.get(i, [])
                number = names.index(token.upper()) + lo if token.upper() in names else (
                    int(token) if token.isdigit() else None)
                if number is None or not lo <= number <= hi:
                    raise BadRequest("Schedule cron is not a supported format(https://godoc.org/github.com/"
                                     f"robfig/cron). Error: {token!r} out of range {lo}-{hi}: {cron}")
