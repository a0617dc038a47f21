"""Validated strings of the cloud sections: each type accepts only what the service it ends up in accepts.
Why and sources: docs/internals.md."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator

PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]$")
SA_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com$")
# registry/path:tag or registry/path@sha256:digest; no tag, or the moving :latest, is unpinned.
IMAGE_RE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+"
                      r"(:(?!latest$)[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
MACHINE_RE = re.compile(r"^[a-z0-9-]{1,64}$")
ACCELERATOR_RE = re.compile(r"^[A-Z0-9_]{1,64}$")
TOPOLOGY_RE = re.compile(r"^[0-9]+x[0-9]+(x[0-9]+)?$")
SUBNET_RE = re.compile(r"^(https://www\.googleapis\.com/compute/v1/projects/(?P<project>[a-z0-9-]+)/)?"
                       r"regions/(?P<region>[a-z0-9-]+)/subnetworks/(?P<name>[a-z0-9-]+)$")


def check(regex: re.Pattern, value: str, what: str) -> str:
    if not regex.match(value):
        raise ValueError(f"{value!r} is not a valid {what}")
    return value


def matching(regex: re.Pattern, what: str) -> Any:
    """A str type that only accepts values matching `regex`; the error says what was expected."""
    return Annotated[str, AfterValidator(lambda v: check(regex, v, what))]


ProjectId = matching(PROJECT_RE, "GCP project id (6-30 chars: lower-case letters, digits, '-')")
Region = matching(REGION_RE, "GCP region (e.g. us-central1)")
Image = matching(IMAGE_RE, "container image pinned by tag or digest (registry/path:tag or @sha256:...)")
ServiceAccount = matching(SA_RE, "service account email (name@project.iam.gserviceaccount.com)")
MachineType = matching(MACHINE_RE, "machine type (e.g. n1-standard-8)")
AcceleratorType = matching(ACCELERATOR_RE, "accelerator type (e.g. NVIDIA_TESLA_T4, TPU_V3)")
TpuTopology = matching(TOPOLOGY_RE, "TPU topology (e.g. 2x2)")
Subnetwork = matching(SUBNET_RE, "subnetwork (regions/REGION/subnetworks/NAME)")

# Kubernetes object names (namespaces: RFC 1123 label; service accounts: RFC 1123 subdomain).
DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# KFP stores experiment display names in a varchar(128) column (backend/src/apiserver/model/experiment.go).
EXPERIMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,127}$")
ENV_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")

Namespace = matching(DNS_LABEL_RE, "Kubernetes namespace (lower-case letters, digits, '-', at most 63)")
K8sServiceAccount = matching(DNS_SUBDOMAIN_RE, "Kubernetes service account name (lower-case RFC 1123 name)")
Experiment = matching(EXPERIMENT_RE, "experiment name (letters, digits, ' ', '.', '_', '-'; at most 128)")
EnvName = matching(ENV_RE, "environment variable name (upper-case letters, digits, '_')")
