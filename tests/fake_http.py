"""What the local JSON fakes (fake_vertex.py, fake_google_apis.py) share: the loopback JSON server
(pipeline/dryrun/json_server.py, which the dry run's stand-ins use too), the requests as tests read them back,
and a hook that records what it is sent."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.dryrun.json_server import JsonServer


@dataclass
class Request:
    """One request a fake received, as its tests read it back."""
    method: str
    path: str
    query: dict
    body: dict
    headers: dict = field(default_factory=dict)




@dataclass
class Hook(JsonServer):
    """A webhook that takes POSTs and answers `status`."""
    status: int = 200
    requests: list[Request] = field(default_factory=list)

    def _serve(self, method, path, query, body):
        self.requests.append(Request(method, path, query, body))
        return self.status, {}
