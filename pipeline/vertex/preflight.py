"""`python -m pipeline preflight`: catch a broken project before paying for a run.

One line per check, `ok`, `FAIL` (with the fix) or `?` (could not be
checked, and why). `submit` and `schedule create` run it first and stop on
any FAIL (`--skip-preflight` skips it). The checks, in order:
- the APIs the configured run calls are enabled (Service Usage);
- the pipeline bucket exists and the caller may read it, the caller may
  start pipeline runs and act as vertex.service_account (testIamPermissions:
  it answers for the caller only);
- each service account may do what its step needs (pipeline/vertex/access.py),
  asked of Policy Troubleshooter, which answers for another principal and
  evaluates the bucket's prefix conditions;
- the images exist in Artifact Registry;
- the Dataflow subnetwork has Private Google Access (Compute Engine);
- the TPU type is offered in a zone of vertex.region (Cloud TPU's list,
  which tracks where Vertex trains on TPUs; a "?" there is not a verdict).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc

from pipeline.config import Config
from pipeline.errors import EXIT_FAILED, EXIT_OK, CommandFailed, ConfigError
from pipeline.vertex import access, images
from pipeline.vertex.google_apis import GoogleApis
from pipeline.vertex.presets import cloud_tpu_type

OK, FAIL, UNKNOWN = "ok", "FAIL", "?"
TERRAFORM = "infra/terraform's `terraform apply`"
# What a check that cannot reach its API raises; it then reports "?", not FAIL.
_API_ERRORS = (gexc.GoogleAPICallError, gexc.RetryError, requests.RequestException, auth_exc.TransportError)


@dataclasses.dataclass(frozen=True)
class Result:
    status: str
    check: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<4} {self.check}: {self.detail}" + (f"; fix: {self.fix}" if self.fix else "")


def required_apis(config: Config) -> list[str]:
    apis = ["aiplatform", "storage", "artifactregistry", "iam", "cloudresourcemanager"]
    if config.dataflow is not None and config.dataflow.enabled:
        apis += ["dataflow", "compute"]
    return [f"{a}.googleapis.com" for a in apis]


def _apis(config: Config, g: GoogleApis) -> list[Result]:
    project, wanted = config.vertex.project, required_apis(config)
    answer = g.get("serviceusage", f"/v1/projects/{project}/services:batchGet",
                   params={"names": [f"projects/{project}/services/{a}" for a in wanted]})
    enabled = {s["name"].rsplit("/", 1)[-1] for s in answer.get("services", []) if s.get("state") == "ENABLED"}
    missing = [a for a in wanted if a not in enabled]
    if missing:
        return [Result(FAIL, "APIs", f"not enabled: {', '.join(missing)}",
                       f"gcloud services enable {' '.join(missing)} --project {project}, or {TERRAFORM}")]
    return [Result(OK, "APIs", f"enabled: {', '.join(wanted)}")]


def _bucket(config: Config, g: GoogleApis) -> list[Result]:
    name = config.pipeline.root_uri[len("gs://"):].split("/", 1)[0]
    bucket = g.storage().lookup_bucket(name)
    if bucket is None:
        return [Result(FAIL, f"bucket gs://{name}", "does not exist (pipeline.root)",
                       f"create it with {TERRAFORM} or fix pipeline.root")]
    if "storage.buckets.get" not in bucket.test_iam_permissions(["storage.buckets.get"]):
        return [Result(FAIL, f"bucket gs://{name}", "you may not read it (storage.buckets.get)",
                       "grant yourself roles/storage.legacyBucketReader on it (Terraform: var deployers)")]
    return [Result(OK, f"bucket gs://{name}", f"exists ({bucket.location}), readable by you")]


def _caller(config: Config, g: GoogleApis) -> list[Result]:
    project, sa = config.vertex.project, config.vertex.service_account
    wanted = ["aiplatform.pipelineJobs.create", "aiplatform.schedules.create"]
    granted = set(g.projects().test_iam_permissions(resource=f"projects/{project}", permissions=wanted).permissions)
    results = [Result(OK, "you", f"may start pipeline runs and schedules in {project}") if granted >= set(wanted)
               else Result(FAIL, "you", f"missing {', '.join(sorted(set(wanted) - granted))} in {project}",
                           "grant yourself roles/aiplatform.user (Terraform: var deployers)")]
    answer = g.post("iam", f"/v1/projects/-/serviceAccounts/{sa}:testIamPermissions",
                    {"permissions": ["iam.serviceAccounts.actAs"]})
    if "iam.serviceAccounts.actAs" in answer.get("permissions", []):
        results.append(Result(OK, "you", f"may run pipelines as {sa}"))
    else:
        results.append(Result(FAIL, "you", f"may not act as {sa} (vertex.service_account)",
                              f"grant yourself roles/iam.serviceAccountUser on {sa} (Terraform: var deployers)"))
    return results


def _accounts(config: Config, g: GoogleApis) -> list[Result]:
    by_account: dict[tuple[str, str], list[tuple[access.Need, str]]] = {}
    unavailable: Optional[str] = None
    for need in access.needs(config):
        if unavailable is None:
            try:
                state = _troubleshoot(g, need)
            except _API_ERRORS as e:
                unavailable = f"Policy Troubleshooter: {_short(e)}"
        by_account.setdefault((need.field, need.account), []).append((need, unavailable or state))
    return [_account_result(field, account, answers) for (field, account), answers in by_account.items()]


def _troubleshoot(g: GoogleApis, need: access.Need) -> str:
    query = {"principal": need.account, "fullResourceName": need.resource, "permission": need.permission}
    if need.object_name:
        query["conditionContext"] = {"resource": {"service": "storage.googleapis.com", "name": need.object_name,
                                                  "type": "storage.googleapis.com/Object"}}
    answer = g.post("policytroubleshooter", "/v3/iam:troubleshoot", {"accessTuple": query})
    return answer.get("overallAccessState", "OVERALL_ACCESS_STATE_UNSPECIFIED")


def _account_result(field: str, account: str, answers: list[tuple[access.Need, str]]) -> Result:
    check = f"{account} ({field})"
    denied = [n for n, state in answers if state == "CANNOT_ACCESS"]
    unknown = [(n, state) for n, state in answers if state not in ("CAN_ACCESS", "CANNOT_ACCESS")]
    if denied:
        return Result(FAIL, check, "may not " + "; ".join(f"{n.what} ({n.permission})" for n in denied),
                      "grant " + "; ".join(sorted({n.grant for n in denied})) + f" ({TERRAFORM} does)")
    if unknown:
        reasons = sorted({state for _, state in unknown})
        return Result(UNKNOWN, check, f"could not check {len(unknown)} of {len(answers)} needs ({', '.join(reasons)})",
                      "Policy Troubleshooter needs its API enabled and roles/iam.securityReviewer for you")
    return Result(OK, check, "may " + "; ".join(n.what for n, _ in answers))


def _images(config: Config, g: GoogleApis) -> list[Result]:
    results = []
    for image in dict.fromkeys([config.vertex.pipeline_image, config.vertex.trainer_container_image]):
        ref = images.parse(image)
        if ref is None:
            results.append(Result(UNKNOWN, f"image {image}", "not in Artifact Registry; not checked"))
            continue
        try:
            g.get("artifactregistry", f"/v1/{ref.api_path}")
        except gexc.NotFound:
            results.append(Result(FAIL, f"image {image}", "not found in Artifact Registry",
                                  "build and push it (infra/cloudbuild.yaml) or fix the vertex.*image setting"))
            continue
        results.append(Result(OK, f"image {image}", "exists"))
    return results


def _subnetwork(config: Config, g: GoogleApis) -> list[Result]:
    flow = config.dataflow
    if flow is None or not flow.enabled:
        return []
    if flow.use_public_ips:
        return [Result(OK, "Dataflow network", "workers have public IPs (dataflow.use_public_ips)")]
    project, region, name = flow.subnetwork_parts(config.vertex.project)
    check = f"subnetwork {name} ({project}/{region})"
    try:
        subnet = g.get("compute", f"/compute/v1/projects/{project}/regions/{region}/subnetworks/{name}")
    except gexc.NotFound:
        return [Result(FAIL, check, "does not exist (dataflow.subnetwork)",
                       f"create it with {TERRAFORM} or fix dataflow.subnetwork")]
    if not subnet.get("privateIpGoogleAccess"):
        return [Result(FAIL, check, "Private Google Access is off: workers without public IPs cannot reach "
                       "Cloud Storage or Artifact Registry",
                       f"gcloud compute networks subnets update {name} --region {region} "
                       f"--enable-private-ip-google-access --project {project}")]
    return [Result(OK, check, "has Private Google Access")]


def _tpu(config: Config, g: GoogleApis) -> list[Result]:
    pool, region, project = config.vertex.worker_pool, config.vertex.region, config.vertex.project
    tpu_type = cloud_tpu_type(pool.spec, pool.machine_spec)
    if tpu_type is None:
        return []
    zones = [loc["locationId"] for loc in g.get("tpu", f"/v2/projects/{project}/locations",
                                                 params={"pageSize": 500}).get("locations", [])
             if loc["locationId"].startswith(f"{region}-")]
    for zone in sorted(zones):
        try:
            g.get("tpu", f"/v2/projects/{project}/locations/{zone}/acceleratorTypes/{tpu_type}")
        except gexc.NotFound:
            continue
        return [Result(OK, f"TPU {tpu_type}", f"offered in {zone} (preset {pool.preset})")]
    return [Result(FAIL, f"TPU {tpu_type}", f"offered in no zone of {region} (preset {pool.preset})",
                   "set vertex.region to a region with it (TPU v5e: e.g. us-central1, europe-west4) or pick "
                   "another vertex.worker_pool.preset")]


CHECKS: list[tuple[str, Callable[[Config, GoogleApis], list[Result]]]] = [
    ("APIs", _apis), ("bucket", _bucket), ("you", _caller), ("service accounts", _accounts),
    ("images", _images), ("Dataflow network", _subnetwork), ("TPU", _tpu)]


def run(config: Config, endpoint: Optional[str] = None) -> list[Result]:
    g = GoogleApis(config.vertex.project, endpoint)
    results = []
    for name, check in CHECKS:
        try:
            results.extend(check(config, g))
        except _API_ERRORS as e:
            results.append(Result(UNKNOWN, name, f"could not check: {_short(e)}"))
    return results


def ensure(config: Config, endpoint: Optional[str] = None, skip: bool = False) -> None:
    """What submit and schedule create run first: print the checks, stop on a failure."""
    if skip:
        print("preflight: skipped (--skip-preflight)")
        return
    results = run(config, endpoint)
    for result in results:
        print(result.line())
    failed = [r for r in results if r.status == FAIL]
    if failed:
        raise CommandFailed(f"preflight: {len(failed)} check(s) failed (FAIL above); fix them, "
                            "or pass --skip-preflight to go ahead anyway")


def cmd_preflight(config: Config, args) -> int:
    if config.vertex is None:
        raise ConfigError("preflight needs a vertex section in the config (see configs/vertex.yaml)")
    results = run(config, args.preflight_endpoint)
    for result in results:
        print(result.line())
    return EXIT_FAILED if any(r.status == FAIL for r in results) else EXIT_OK


def _short(e: Exception) -> str:
    message = getattr(e, "message", None) or str(e)
    return f"{type(e).__name__}: {message}"[:300]
