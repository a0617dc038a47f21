"""The Google APIs preflight calls, on 127.0.0.1, answering from a described project.

Cloud Storage (bucket get, which fake-gcs-server answers without IAM),
Resource Manager and IAM testIamPermissions, Service Usage (services and
quota metrics), Artifact Registry, Compute Engine subnetworks and Policy
Troubleshooter v3, each on the REST path the real client or preflight uses,
with Google's JSON errors. Each route belongs to one API; a call to an API
the project has not enabled gets the 403 Google sends for it. Policy
Troubleshooter answers from `grants`: (principal, permission, resource
prefix), where a prefix of an object's full resource name stands for an IAM
condition on resource.name.

Where the real service is stricter than "answer from the description":
- A disabled API: 403 PERMISSION_DENIED with a google.rpc.ErrorInfo of reason
  SERVICE_DISABLED, domain googleapis.com, metadata service and consumer
  (Google's error model, cloud.google.com/apis/design/errors, "Error info").
- Cloud Storage buckets.get needs storage.buckets.get; without it, the JSON
  API's 403 (its "HTTP status and error codes for JSON" page: error.code,
  error.message, error.errors[] of domain global, reason forbidden), worded as
  Cloud Storage words it: "<caller> does not have storage.buckets.get access
  to the Google Cloud Storage bucket. Permission 'storage.buckets.get' denied
  on resource (or it may not exist)."
- Service Usage's consumerQuotaMetrics.get needs serviceusage.quotas.get (its
  REST reference page).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from tests.fake_http import JsonServer

PROJECT_NUMBER = "123456"


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
    # Quota metric (aiplatform.googleapis.com/...) -> region -> effective limit; the default bucket is 0.
    quotas: dict[str, dict[str, int]]
    caller_email: str = "deployer@example.com"
    requests: list[tuple[str, str]] = field(default_factory=list)
    apis_called: set[str] = field(default_factory=set)  # the API of every route served (enabled or not)


class FakeGoogleApis(JsonServer):
    def __init__(self, project: Project):
        self.p = project

    def _serve(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        self.p.requests.append((method, path))
        return self._route(method, path, query, body)

    def _route(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        routes = [
            ("serviceusage", "GET", r"/v1/projects/(?P<project>[^/]+)/services:batchGet", self._services),
            ("serviceusage", "GET", r"/v1beta1/projects/[^/]+/services/(?P<service>[^/]+)/consumerQuotaMetrics/"
                                    r"(?P<metric>[^/]+)", self._quota_metric),
            ("storage", "GET", r"/storage/v1/b/(?P<bucket>[^/]+)", self._bucket),
            ("cloudresourcemanager", "POST", r"/v3/projects/(?P<project>[^/:]+):testIamPermissions",
             self._caller_permissions),
            ("iam", "POST", r"/v1/projects/-/serviceAccounts/(?P<account>[^/:]+):testIamPermissions", self._act_as),
            ("policytroubleshooter", "POST", r"/v3/iam:troubleshoot", self._troubleshoot),
            ("artifactregistry", "GET", r"/v1/(?P<image>projects/[^/]+/locations/[^/]+/repositories/.+)",
             self._image),
            ("compute", "GET", r"/compute/v1/(?P<subnet>projects/[^/]+/regions/[^/]+/subnetworks/[^/]+)",
             self._subnetwork),
        ]
        for api, m, regex, handler in routes:
            match = re.fullmatch(regex, path)
            if match and m == method:
                self.p.apis_called.add(f"{api}.googleapis.com")
                if f"{api}.googleapis.com" not in self.p.enabled_apis:
                    return self._disabled(f"{api}.googleapis.com")
                return handler(query, body, **match.groupdict())
        return self.error(404, f"fake_google_apis has no route for {method} {path}")

    def _disabled(self, service: str) -> tuple[int, dict]:
        status, answer = self.error(403, f"{service} has not been used in project {PROJECT_NUMBER} before or it is "
                                         f"disabled. Enable it by visiting https://console.developers.google.com/"
                                         f"apis/api/{service}/overview?project={PROJECT_NUMBER} then retry.")
        answer["error"]["details"] = [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
            "domain": "googleapis.com", "metadata": {"service": service, "consumer": f"projects/{PROJECT_NUMBER}"}}]
        return status, answer

    def _services(self, query, body, project):
        return 200, {"services": [{"name": n.replace(project, PROJECT_NUMBER),
                                   "state": "ENABLED" if n.rsplit("/", 1)[-1] in self.p.enabled_apis else "DISABLED"}
                                  for n in query.get("names", [])]}

    def _quota_metric(self, query, body, service, metric):
        if "serviceusage.quotas.get" not in self.p.caller:
            return self.error(403, f"Permission 'serviceusage.quotas.get' denied on resource "
                                   f"'projects/{PROJECT_NUMBER}/services/{service}' (or it may not exist).")
        metric = unquote(metric)
        if metric not in self.p.quotas:
            return self.error(404, f"Metric {metric} not found for service {service}")
        name = f"projects/{PROJECT_NUMBER}/services/{service}/consumerQuotaMetrics/{metric.replace('/', '%2F')}"
        # The global default bucket first, then one per region with its own value (QuotaBucket ordering).
        buckets = [{"effectiveLimit": "0", "defaultLimit": "0"}] + [
            {"effectiveLimit": str(limit), "defaultLimit": "0", "dimensions": {"region": region}}
            for region, limit in sorted(self.p.quotas[metric].items())]
        return 200, {"name": name, "metric": metric, "unit": "1/{project}/{region}", "consumerQuotaLimits": [
            {"name": f"{name}/limits/%2Fproject%2Fregion", "metric": metric, "unit": "1/{project}/{region}",
             "quotaBuckets": buckets}]}

    def _bucket(self, query, body, bucket):
        if bucket not in self.p.buckets:
            return self.error(404, f"The specified bucket does not exist: {bucket}")
        if "storage.buckets.get" not in self.p.caller:
            message = (f"{self.p.caller_email} does not have storage.buckets.get access to the Google Cloud Storage "
                       "bucket. Permission 'storage.buckets.get' denied on resource (or it may not exist).")
            return 403, {"error": {"code": 403, "message": message,
                                   "errors": [{"message": message, "domain": "global", "reason": "forbidden"}]}}
        return 200, {"kind": "storage#bucket", "name": bucket, "location": self.p.buckets[bucket]}

    def _caller_permissions(self, query, body, project):
        return 200, {"permissions": [p for p in body.get("permissions", []) if p in self.p.caller]}

    def _act_as(self, query, body, account):
        if unquote(account) not in self.p.accounts:
            return self.error(404, f"Service account {account} does not exist")
        return 200, {"permissions": [p for p in body.get("permissions", []) if p in self.p.caller]}

    def _troubleshoot(self, query, body):
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
