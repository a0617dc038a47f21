"""The Google API clients preflight uses, with the user's Application Default Credentials.

Cloud Storage and Resource Manager through their installed client libraries
(google-cloud-storage, google-cloud-resource-manager); Service Usage, IAM,
Artifact Registry, Compute Engine, Cloud TPU and Policy Troubleshooter have
no client library in requirements.lock, so they are called over REST through
google-auth's AuthorizedSession, with errors raised as google.api_core
exceptions like the libraries raise them. `endpoint` sends every call to one
local emulator (tests), over plain http with anonymous credentials only.
"""

from __future__ import annotations

from typing import Any, Optional

from pipeline.errors import CommandFailed
from pipeline.vertex.client import endpoint_credentials

_HOSTS = {
    "serviceusage": "https://serviceusage.googleapis.com",
    "iam": "https://iam.googleapis.com",
    "artifactregistry": "https://artifactregistry.googleapis.com",
    "compute": "https://compute.googleapis.com",
    "tpu": "https://tpu.googleapis.com",
    "policytroubleshooter": "https://policytroubleshooter.googleapis.com",
}
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
TIMEOUT_SECONDS = 30


class GoogleApis:
    def __init__(self, project: str, endpoint: Optional[str] = None):
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
        from google.auth.transport.requests import AuthorizedSession

        self.project, self.endpoint = project, endpoint.rstrip("/") if endpoint else None
        self.credentials = endpoint_credentials(endpoint, "--preflight-endpoint")
        if self.credentials is None:
            try:
                self.credentials, _ = google.auth.default(scopes=_SCOPES)
            except DefaultCredentialsError:
                raise CommandFailed("no Application Default Credentials: run "
                                    "`gcloud auth application-default login`") from None
        self.session = AuthorizedSession(self.credentials)

    def _url(self, api: str, path: str) -> str:
        return (self.endpoint or _HOSTS[api]) + path

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

        options = {"api_endpoint": self.endpoint} if self.endpoint else None
        return storage.Client(project=self.project, credentials=self.credentials, client_options=options)

    def projects(self):
        from google.cloud import resourcemanager_v3

        options = {"api_endpoint": self.endpoint} if self.endpoint else None
        return resourcemanager_v3.ProjectsClient(credentials=self.credentials, transport="rest",
                                                 client_options=options)
