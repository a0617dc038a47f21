"""A small Vertex AI REST server on 127.0.0.1 for the real google-cloud-aiplatform client.

It speaks the v1 calls the CLI makes (create/get pipeline job; create, list,
get, pause, resume, delete schedule), keeps what it was sent in `requests`
for the tests to inspect, and answers with Google's JSON error format when a
test queues a failure, so the client raises its real exception types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.fake_http import JsonServer, Request

_PARENT = r"/v1/(?P<parent>projects/[^/]+/locations/[^/]+)"
_NOW = "2026-11-30T08:00:00Z"



@dataclass
class FakeVertex(JsonServer):
    requests: list[Request] = field(default_factory=list)
    jobs: dict[str, dict] = field(default_factory=dict)
    schedules: dict[str, dict] = field(default_factory=dict)
    # States a job walks through on successive GETs; the last one sticks.
    job_states: list[str] = field(default_factory=lambda: ["PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED"])
    job_error: str = ""
    _failures: list[tuple[str, str, int, str]] = field(default_factory=list)

    def fail_next(self, method: str, path_regex: str, status: int, message: str) -> None:
        """The next request matching method and path gets this HTTP error."""
        self._failures.append((method, path_regex, status, message))

    def _serve(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        request = Request(method, path, query, body)
        self.requests.append(request)
        return self._route(request)

    def sent(self, method: str, path_regex: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.search(path_regex, r.path)]

    def _route(self, r: Request) -> tuple[int, dict]:
        for i, (method, regex, status, message) in enumerate(self._failures):
            if method == r.method and re.search(regex, r.path):
                del self._failures[i]
                return self.error(status, message)
        routes = [
            ("POST", _PARENT + r"/pipelineJobs$", self._create_job),
            ("GET", _PARENT + r"/pipelineJobs/(?P<id>[^/:]+)$", self._get_job),
            ("POST", _PARENT + r"/schedules$", self._create_schedule),
            ("GET", _PARENT + r"/schedules$", self._list_schedules),
            ("GET", _PARENT + r"/schedules/(?P<id>[^/:]+)$", self._get_schedule),
            ("POST", _PARENT + r"/schedules/(?P<id>[^/:]+):(?P<verb>pause|resume)$", self._pause_resume),
            ("DELETE", _PARENT + r"/schedules/(?P<id>[^/:]+)$", self._delete_schedule),
        ]
        for method, regex, handler in routes:
            m = re.match(regex, r.path)
            if m and method == r.method:
                return handler(r, **m.groupdict())
        return self.error(404, f"fake_vertex has no route for {r.method} {r.path}")

    def _create_job(self, r: Request, parent: str) -> tuple[int, dict]:
        job_id = r.query["pipelineJobId"][0]
        job = {**r.body, "name": f"{parent}/pipelineJobs/{job_id}", "state": "PIPELINE_STATE_PENDING",
               "createTime": _NOW, "_polls": 0}
        self.jobs[job_id] = job
        return 200, _public(job)

    def _get_job(self, r: Request, parent: str, id: str) -> tuple[int, dict]:
        job = self.jobs.get(id)
        if job is None:
            return self.error(404, f"PipelineJob {parent}/pipelineJobs/{id} not found")
        job["state"] = self.job_states[min(job["_polls"], len(self.job_states) - 1)]
        job["_polls"] += 1
        if job["state"] == "PIPELINE_STATE_FAILED" and self.job_error:
            job["error"] = {"code": 9, "message": self.job_error}
        return 200, _public(job)

    def _create_schedule(self, r: Request, parent: str) -> tuple[int, dict]:
        schedule_id = str(1000 + len(self.schedules))
        schedule = {**r.body, "name": f"{parent}/schedules/{schedule_id}", "state": "ACTIVE", "createTime": _NOW,
                    "nextRunTime": r.body.get("startTime", _NOW)}
        self.schedules[schedule_id] = schedule
        return 200, schedule

    def _list_schedules(self, r: Request, parent: str) -> tuple[int, dict]:
        return 200, {"schedules": list(self.schedules.values())}

    def _get_schedule(self, r: Request, parent: str, id: str) -> tuple[int, dict]:
        if id not in self.schedules:
            return self.error(404, f"Schedule {parent}/schedules/{id} not found")
        return 200, self.schedules[id]

    def _pause_resume(self, r: Request, parent: str, id: str, verb: str) -> tuple[int, dict]:
        if id not in self.schedules:
            return self.error(404, f"Schedule {parent}/schedules/{id} not found")
        self.schedules[id]["state"] = "PAUSED" if verb == "pause" else "ACTIVE"
        return 200, {}

    def _delete_schedule(self, r: Request, parent: str, id: str) -> tuple[int, dict]:
        if self.schedules.pop(id, None) is None:
            return self.error(404, f"Schedule {parent}/schedules/{id} not found")
        return 200, {"name": f"{parent}/operations/{id}", "done": True,
                     "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}


def _public(job: dict) -> dict:
    return {k: v for k, v in job.items() if not k.startswith("_")}
