"""Which credentials a call to a Google API endpoint gets: ADC, or anonymous for a local emulator over plain http."""

from __future__ import annotations

from typing import Optional

from pipeline.endpoints import parse_endpoint
from pipeline.errors import CommandFailed, ConfigError

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def endpoint_credentials(endpoint: Optional[str], flag: str):
    """Anonymous credentials for a plain-http local emulator, None (ADC) otherwise;
    plain http anywhere else is refused, so no token travels unencrypted."""
    if not endpoint:
        return None
    try:
        url = parse_endpoint(endpoint, flag)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if url.scheme == "https":
        return None
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def application_default(scopes: Optional[list[str]] = None):
    """Application Default Credentials; without any, CommandFailed saying how to get them (not google-auth's
    traceback)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=scopes or [CLOUD_PLATFORM_SCOPE])
    except DefaultCredentialsError:
        raise CommandFailed("no Application Default Credentials: run `gcloud auth application-default login`") \
            from None
    return credentials
