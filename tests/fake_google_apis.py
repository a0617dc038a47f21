"""The Google APIs preflight calls, on 127.0.0.1, answering from a described project.

Cloud Storage (bucket get and testIamPermissions, which fake-gcs-server does
not implement), Resource Manager and IAM testIamPermissions, Service Usage,
Artifact Registry, Compute Engine subnetworks, Cloud TPU accelerator types
and Policy Troubleshooter v3, each on the REST path the real client or
preflight uses, with Google's JSON errors. Policy Troubleshooter answers from
`grants`: (principal, permission, resource prefix), where a prefix of an
object's full resource name stands for an IAM condition on resource.name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from tests.fake_http import JsonServer


@dataclass
class Project:
    project: str
    enabled_apis: set[str]
    buckets: dict[str, str]  # name -> location
    caller: set[str]  # permissions the caller holds everywhere it asks
    accounts: set[str]
    grants: set[tuple[str, str, str]]  # (principal, permission, resource prefix)
    images: set[str]  # Artifact Registry v1 resource paths (tags or dockerImages)
    subnetworks: dict[str, bool]  # projects/P/regions/R/subnetworks/N -> Private Google Access
    tpu_types: dict[str, set[str]]  # zone -> accelerator types
    troubleshooter_error: str = ""  # e.g. the API is disabled: 403 with this message
    requests: list[tuple[str, str]] = field(default_factory=list)


class FakeGoogleApis(JsonServer):
    def __init__(self, project: Project):
        self.p = project

    def _serve(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        self.p.requests.append((method, path))
        return self._route(method, path, query, body)

    def _route(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        routes = [
            ("GET", r"/v1/projects/(?P<project>[^/]+)/services:batchGet", self._services),
            ("GET", r"/storage/v1/b/(?P<bucket>[^/]+)", self._bucket),
            ("GET", r"/storage/v1/b/(?P<bucket>[^/]+)/iam/testPermissions", self._bucket_permissions),
            ("POST", r"/v3/projects/(?P<project>[^/:]+):testIamPermissions", self._caller_permissions),
            ("POST", r"/v1/projects/-/serviceAccounts/(?P<account>[^/:]+):testIamPermissions", self._act_as),
            ("POST", r"/v3/iam:troubleshoot", self._troubleshoot),
            ("GET", r"/v1/(?P<image>projects/[^/]+/locations/[^/]+/repositories/.+)", self._image),
            ("GET", r"/compute/v1/(?P<subnet>projects/[^/]+/regions/[^/]+/subnetworks/[^/]+)", self._subnetwork),
            ("GET", r"/v2/projects/(?P<project>[^/]+)/locations", self._tpu_locations),
            ("GET", r"/v2/projects/[^/]+/locations/(?P<zone>[^/]+)/acceleratorTypes/(?P<type>[^/]+)", self._tpu_type),
        ]
        for m, regex, handler in routes:
            match = re.fullmatch(regex, path)
            if match and m == method:
                return handler(query, body, **match.groupdict())
        return self.error(404, f"fake_google_apis has no route for {method} {path}")

    def _services(self, query, body, project):
        return 200, {"services": [{"name": n.replace(project, "123456"), "state": "ENABLED" if n.rsplit("/", 1)[-1]
                                   in self.p.enabled_apis else "DISABLED"} for n in query.get("names", [])]}

    def _bucket(self, query, body, bucket):
        if bucket not in self.p.buckets:
            return self.error(404, f"The specified bucket does not exist: {bucket}")
        return 200, {"kind": "storage#bucket", "name": bucket, "location": self.p.buckets[bucket]}

    def _bucket_permissions(self, query, body, bucket):
        return 200, {"kind": "storage#testIamPermissionsResponse",
                     "permissions": [p for p in query.get("permissions", []) if p in self.p.caller]}

    def _caller_permissions(self, query, body, project):
        return 200, {"permissions": [p for p in body.get("permissions", []) if p in self.p.caller]}

    def _act_as(self, query, body, account):
        if unquote(account) not in self.p.accounts:
            return self.error(404, f"Service account {account} does not exist")
        return 200, {"permissions": [p for p in body.get("permissions", []) if p in self.p.caller]}

    def _troubleshoot(self, query, body):
        if self.p.troubleshooter_error:
            return self.error(403, self.p.troubleshooter_error)
        t = body["accessTuple"]
        granted = any(principal == t["principal"] and permission == t["permission"]
                      and t["fullResourceName"].startswith(prefix)
                      for principal, permission, prefix in self.p.grants)
        return 200, {"accessTuple": t, "overallAccessState": "CAN_ACCESS" if granted else "CANNOT_ACCESS"}

    def _image(self, query, body, image):
        if unquote(image) not in self.p.images:
            return self.error(404, f"Requested entity was not found: {unquote(image)}")
        return 200, {"name": unquote(image)}

    def _subnetwork(self, query, body, subnet):
        if subnet not in self.p.subnetworks:
            return self.error(404, f"The resource '{subnet}' was not found")
        return 200, {"name": subnet.rsplit("/", 1)[-1], "privateIpGoogleAccess": self.p.subnetworks[subnet]}

    def _tpu_locations(self, query, body, project):
        return 200, {"locations": [{"locationId": zone, "name": f"projects/{project}/locations/{zone}"}
                                   for zone in self.p.tpu_types]}

    def _tpu_type(self, query, body, zone, type):
        if type not in self.p.tpu_types.get(zone, set()):
            return self.error(404, f"Resource 'acceleratorTypes/{type}' was not found in {zone}")
        return 200, {"type": type}
