"""The Google API clients preflight uses, with the user's Application Default Credentials.
Why and sources: docs/internals.md."""

from __future__ import annotations

import re
from typing import Any, Optional

from pipeline.cloud.credentials import CLOUD_PLATFORM_SCOPE, application_default, endpoint_credentials

# Every API preflight calls, by the name its calls use here (<name>.googleapis.com); a call to another is
# refused, and infra/terraform enables each of these (tests/test_infra.py checks it).
APIS = ("serviceusage", "storage", "cloudresourcemanager", "iam", "policytroubleshooter", "artifactregistry",
        "compute")
_SCOPES = [CLOUD_PLATFORM_SCOPE]
TIMEOUT_SECONDS = 30


class GoogleApis:
    def __init__(self, project: str, endpoint: Optional[str] = None):
        from google.auth.transport.requests import AuthorizedSession

        self.project, self.endpoint = project, endpoint.rstrip("/") if endpoint else None
        self.credentials = endpoint_credentials(endpoint, "--preflight-endpoint") or application_default(_SCOPES)
        self.session = AuthorizedSession(self.credentials)

    def _host(self, api: str) -> str:
        if api not in APIS:
            raise ValueError(f"{service(api)} is not in google_apis.APIS (the APIs infra/terraform enables)")
        return self.endpoint or f"https://{service(api)}"

    def _url(self, api: str, path: str) -> str:
        return self._host(api) + path

    def get(self, api: str, path: str, params: Optional[dict] = None) -> dict[str, Any]:
        return self._checked(self.session.get(self._url(api, path), params=params, timeout=TIMEOUT_SECONDS))

    def post(self, api: str, path: str, body: dict) -> dict[str, Any]:
        return self._checked(self.session.post(self._url(api, path), json=body, timeout=TIMEOUT_SECONDS))

    @staticmethod
    def _checked(response) -> dict[str, Any]:
        from google.api_core import exceptions as gexc

        if response.status_code >= 400:
            raise gexc.from_http_response(response)
        return response.json() if response.content else {}

    def storage(self):
        from google.cloud import storage

        host = self._host("storage")
        options = {"api_endpoint": host} if self.endpoint else None
        return storage.Client(project=self.project, credentials=self.credentials, client_options=options)

    def projects(self):
        from google.cloud import resourcemanager_v3

        host = self._host("cloudresourcemanager")
        options = {"api_endpoint": host} if self.endpoint else None
        return resourcemanager_v3.ProjectsClient(credentials=self.credentials, transport="rest",
                                                 client_options=options)


def service(api: str) -> str:
    """The service name Service Usage and Terraform know an API by."""
    return f"{api}.googleapis.com"


# How a 403 names the permission it denied. Google APIs: "Permission 'storage.buckets.get' denied on resource
# (or it may not exist)." (IAM's "Permission error messages" page, REST API section); Cloud Storage's JSON API
# puts it in error.message (its "HTTP status and error codes for JSON" page), in that form after "X does not
# have storage.buckets.get access to the Google Cloud Storage bucket.", or in that older form alone.
_DENIED = (re.compile(r"Permission '([\w.]+)' denied"),
           re.compile(r"does not have ([a-z]+\.[A-Za-z]+\.[A-Za-z]+) access"))


def denied_permission(error: Exception, needed: str) -> str:
    """The permission a 403 names; `needed` (what the call needs) when the server named none."""
    message = getattr(error, "message", None) or str(error)
    for pattern in _DENIED:
        found = pattern.search(message)
        if found:
            return found[1]
    return needed


def error_reason(error: Exception) -> Optional[str]:
    """The google.rpc.ErrorInfo reason of an API error (e.g. SERVICE_DISABLED). Read from the JSON details:
    google.api_core keeps a REST error's ErrorInfo as a dict, on which its own `.reason` fails."""
    for detail in getattr(error, "details", None) or ():
        if isinstance(detail, dict) and detail.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo":
            return detail.get("reason")
    return None
