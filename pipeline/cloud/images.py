"""Artifact Registry image references: which repository an image is in, and where the API lists it."""

from __future__ import annotations

import dataclasses
import re
from typing import Optional
from urllib.parse import quote

# LOCATION-docker.pkg.dev/PROJECT/REPOSITORY/PACKAGE[/...]:TAG or @sha256:DIGEST
_AR_RE = re.compile(r"^(?P<location>[a-z0-9-]+)-docker\.pkg\.dev/(?P<project>[a-z0-9-]+)/(?P<repository>[a-z0-9-]+)/"
                    r"(?P<package>[a-z0-9._/-]+?)(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]*)|@(?P<digest>sha256:[0-9a-f]{64}))$")


@dataclasses.dataclass(frozen=True)
class ImageRef:
    location: str
    project: str
    repository: str
    package: str
    tag: Optional[str]
    digest: Optional[str]

    @property
    def repository_name(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/repositories/{self.repository}"

    @property
    def api_path(self) -> str:
        """The Artifact Registry v1 resource that exists iff the image does (a tag, or a digest's image)."""
        package = quote(self.package, safe="")  # nested package names are one path segment
        if self.tag:
            return f"{self.repository_name}/packages/{package}/tags/{quote(self.tag, safe='')}"
        return f"{self.repository_name}/dockerImages/{package}@{self.digest}"


def parse(image: str) -> Optional[ImageRef]:
    """The reference of an Artifact Registry image; None for other registries."""
    m = _AR_RE.match(image)
    return ImageRef(**{k: m[k] for k in ("location", "project", "repository", "package", "tag", "digest")}) \
        if m else None
