"""`python -m pipeline preflight`: catch a broken project before paying for a run. Why: docs/internals.md."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import quote

from google.api_core import exceptions as gexc

from pipeline.cloud import images
from pipeline.cloud.access import check_accounts
from pipeline.cloud.google_apis import GoogleApis, denied_permission, error_reason, service
from pipeline.cloud.preflight import (
    FAIL,
    OK,
    UNKNOWN,
    WARN,
    Result,
    report,
    run_checks,
    stop_if_failed,
)
from pipeline.config import Config
from pipeline.errors import EXIT_FAILED, EXIT_OK, ConfigError
from pipeline.sections.presets import cloud_tpu_type, single_host_error, tpu_cores
from pipeline.vertex import access

TERRAFORM = "infra/terraform's `terraform apply`"


@dataclasses.dataclass(frozen=True)
class Submission:
    """What preflight checks: the config, and the PipelineJob submit would create from the compiled spec."""
    config: Config
    template: Path
    job: dict[str, Any]  # the PipelineJob as the REST API gets it: pipelineSpec, runtimeConfig, serviceAccount...


def submission(config: Config, template: str | os.PathLike, credentials=None,
               enable_caching: Optional[bool] = None) -> Submission:
    """The job submit would send for `template` (with its --cache/--no-cache): client.build_job, run as
    vertex.service_account (submit passes it to aiplatform's PipelineJob.submit, which sets it on the job
    before sending it; schedule create passes it to create_schedule)."""
    from pipeline.vertex.client import build_job

    job = build_job(config, str(template), enable_caching, credentials=credentials).to_dict()
    job["serviceAccount"] = config.vertex.service_account
    return Submission(config, Path(template), job)


def required_apis(config: Config) -> list[str]:
    """The APIs the configured run calls, and who calls them: submit and schedules (aiplatform, and storage
    for the bucket check); Vertex running the spec and the Trainer's CustomJob (aiplatform), pulling the
    images (artifactregistry), acting as the run's service accounts (iam), checking the bucket's project
    (cloudresourcemanager: aiplatform's bucket-squatting check); every step's reads and writes (storage);
    with Dataflow, its jobs and their worker VMs (dataflow, compute). infra/terraform enables each."""
    apis = ["aiplatform", "storage", "artifactregistry", "iam", "cloudresourcemanager"]
    if config.dataflow is not None and config.dataflow.enabled:
        apis += ["dataflow", "compute"]
    return [service(a) for a in apis]


def _apis(sub: Submission, g: GoogleApis) -> list[Result]:
    config = sub.config
    project, wanted = config.vertex.project, required_apis(config)
    answer = g.get("serviceusage", f"/v1/projects/{project}/services:batchGet",
                   params={"names": [f"projects/{project}/services/{a}" for a in wanted]})
    enabled = {s["name"].rsplit("/", 1)[-1] for s in answer.get("services", []) if s.get("state") == "ENABLED"}
    missing = [a for a in wanted if a not in enabled]
    if missing:
        return [Result(FAIL, "APIs", f"not enabled: {', '.join(missing)}",
                       f"gcloud services enable {' '.join(missing)} --project {project}, or {TERRAFORM}")]
    return [Result(OK, "APIs", f"enabled: {', '.join(wanted)}")]


def _bucket(sub: Submission, g: GoogleApis) -> list[Result]:
    name = sub.config.pipeline.root_uri[len("gs://"):].split("/", 1)[0]
    check = f"bucket gs://{name}"
    try:
        # Cloud Storage's buckets.get needs storage.buckets.get: what submit's bucket check and aiplatform ask.
        bucket = g.storage().lookup_bucket(name)
    except gexc.Forbidden as e:
        if error_reason(e) == "SERVICE_DISABLED":  # not a permission: the APIs check says what to enable
            raise
        permission = denied_permission(e, "storage.buckets.get")
        return [Result(FAIL, check, f"you may not read it: Cloud Storage denied {permission} (403)",
                       f"grant yourself {permission} on gs://{name}: roles/storage.legacyBucketReader "
                       "(Terraform grants it to var deployers)")]
    if bucket is None:
        return [Result(FAIL, check, "does not exist (pipeline.root)",
                       f"create it with {TERRAFORM} or fix pipeline.root")]
    return [Result(OK, check, f"exists ({bucket.location}), readable by you (storage.buckets.get)")]


def _caller(sub: Submission, g: GoogleApis) -> list[Result]:
    config = sub.config
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


def _accounts(sub: Submission, g: GoogleApis) -> list[Result]:
    return check_accounts(g, access.needs(sub.config), TERRAFORM)


def _images(sub: Submission, g: GoogleApis) -> list[Result]:
    config, results = sub.config, []
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


def _subnetwork(sub: Submission, g: GoogleApis) -> list[Result]:
    config = sub.config
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


def trainer_pools(job: dict[str, Any]) -> Optional[list[dict[str, Any]]]:
    """The worker pools of the Trainer's CustomJob in the job being sent (TFX's Vertex training args, in the
    Trainer task's custom_config constant); None when no task asks for a CustomJob."""
    from tfx.v1.extensions.google_cloud_ai_platform import TRAINING_ARGS_KEY

    from pipeline.spec import model

    for task in model.read(job.get("pipelineSpec", {})).tasks():
        constant = task.inputs("parameters").get("custom_config", {}).get("runtimeValue", {}).get("constantValue", {})
        try:
            custom = json.loads(constant.get("stringValue") or "null")
        except ValueError:
            continue
        args = custom.get(TRAINING_ARGS_KEY) if isinstance(custom, dict) else None
        if isinstance(args, dict):
            return list(args.get("job_spec", {}).get("worker_pool_specs", []))
    return None


def tuning_trials(job: dict[str, Any]) -> Optional[tuple[int, list[dict[str, Any]]]]:
    """(parallel trials, the trials' worker pools) of the Tuner's HyperparameterTuningJob in the job being sent
    (its tune_args and the trial job in its custom_config, pipeline/dag/tuning.py); None without a Tuner."""
    from components.tuner import TRIAL_JOB_KEY
    from pipeline.spec import model

    for task in model.read(job.get("pipelineSpec", {})).tasks():
        parameters = task.inputs("parameters")
        custom, tune_args = (json.loads(parameters.get(k, {}).get("runtimeValue", {}).get("constantValue", {})
                                        .get("stringValue") or "null") for k in ("custom_config", "tune_args"))
        if isinstance(custom, dict) and TRIAL_JOB_KEY in custom:
            parallel = int((tune_args or {}).get("num_parallel_trials", 1))
            return parallel, list(custom[TRIAL_JOB_KEY]["job_spec"]["worker_pool_specs"])
    return None


def _tuning_quota(spec, cores: int, limit: int, metric: str, region: str, job: dict[str, Any]) -> list[Result]:
    """A warning when the trials running at once take more TPU cores than the quota allows: Vertex would hold
    back or fail the trials beyond it (the Trainer alone fits: _tpu_quota's own check)."""
    tuning = tuning_trials(job)
    if tuning is None or limit < 0:
        return []
    parallel, pools = tuning
    per_trial = sum((tpu_cores(spec, p.get("machine_spec", {})) or 0) * int(p.get("replica_count", 1)) for p in pools)
    check = f"TPU for tuning ({parallel} trial(s) at once)"
    if parallel * per_trial > limit:
        return [Result(WARN, check, f"{parallel} parallel trials x {per_trial} cores = {parallel * per_trial} cores, "
                       f"above the {limit} {metric} allows in {region}: trials beyond it wait or fail",
                       f"set tuning.parallel_trials to {max(1, limit // per_trial)}, or request more quota")]
    return [Result(OK, check, f"{parallel} x {per_trial} cores within {metric}'s {limit} in {region}")]


def _tpu_quota(sub: Submission, g: GoogleApis) -> list[Result]:
    """The TPU the job asks for (the spec's Trainer pool, else the config's): one host, and within quota."""
    pool, region, project = sub.config.vertex.worker_pool, sub.config.vertex.region, sub.config.vertex.project
    if pool.spec.tpu_generation is None:
        return []
    pools = trainer_pools(sub.job)
    machine_spec = pools[0].get("machine_spec", {}) if pools else pool.machine_spec
    problem = single_host_error(pool.spec, machine_spec)
    if problem:
        return [Result(FAIL, f"TPU (preset {pool.preset})", f"the spec's Trainer CustomJob: {problem}",
                       "set vertex.worker_pool to one TPU host and compile again (make compile)")]
    cores = tpu_cores(pool.spec, machine_spec)
    check = f"TPU {cloud_tpu_type(pool.spec, machine_spec)} (preset {pool.preset})"
    if pool.spec.training_quota is None:
        return [Result(UNKNOWN, check, "no Vertex AI custom-training quota metric is known for it; not checked",
                       f"see IAM & Admin > Quotas for Vertex AI TPU training in {region}")]
    metric = f"aiplatform.googleapis.com/{pool.spec.training_quota}"
    answer = g.get("serviceusage", f"/v1beta1/projects/{project}/services/aiplatform.googleapis.com/"
                                   f"consumerQuotaMetrics/{quote(metric, safe='')}")
    limit = regional_limit(answer, region)
    if limit is None:
        return [Result(UNKNOWN, check, f"{metric} has no limit for {region}; not checked")]
    if 0 <= limit < cores:
        return [Result(FAIL, check, f"the Trainer takes {cores} cores and {metric} allows {limit} in {region}",
                       f"request more in IAM & Admin > Quotas ({pool.spec.training_quota}, region {region}), "
                       "or set vertex.region to a region with quota (TPU v5e: e.g. us-central1, europe-west4)")]
    allowed = "no limit" if limit < 0 else f"{limit}"
    return [Result(OK, check, f"{metric} in {region}: {allowed}, the Trainer takes {cores} cores"),
            *_tuning_quota(pool.spec, cores, limit, metric, region, sub.job)]


def regional_limit(metric: dict, region: str) -> Optional[int]:
    """The effective limit of a Service Usage ConsumerQuotaMetric in `region`: the lowest over its limits,
    each from the bucket for the region or else its default bucket (a bucket without dimensions applies to
    every region without its own; services.consumerQuotaMetrics.limits, QuotaBucket); -1 is unlimited."""
    found = []
    for limit in metric.get("consumerQuotaLimits", []):
        buckets = limit.get("quotaBuckets", [])
        own = [b for b in buckets if b.get("dimensions", {}).get("region") == region]
        default = [b for b in buckets if not b.get("dimensions")]
        bucket = (own or default or [None])[0]
        if bucket is not None and "effectiveLimit" in bucket:
            found.append(int(bucket["effectiveLimit"]))
    bounded = [n for n in found if n >= 0]
    return min(bounded) if bounded else (-1 if found else None)


def _spec(sub: Submission, g: GoogleApis) -> list[Result]:
    """The rules the backend applies to the spec (pipeline/spec/rules.py), on the job being sent."""
    from pipeline.spec import model, rules
    from pipeline.spec.backends import VERTEX

    violations = rules.check(model.read(sub.job["pipelineSpec"]), VERTEX)
    if not violations:
        return [Result(OK, "spec", f"keeps the {len(rules.RULES)} rules {VERTEX.title} applies (the dry run's)")]
    return [Result(FAIL, "spec", str(v), "recompile with this code (make compile); if it persists, it is a bug "
                   "here: docs/vertex.md lists each rule with its source") for v in violations]


Check = Callable[[Submission, GoogleApis], list[Result]]
# (name, check), in order. A check that raises one of API_ERRORS reports "?" under its name.
CHECKS: list[tuple[str, Check]] = [
    ("spec", _spec), ("APIs", _apis), ("bucket", _bucket), ("you", _caller), ("service accounts", _accounts),
    ("images", _images), ("Dataflow network", _subnetwork), ("TPU quota", _tpu_quota)]


def run(config: Config, template: str | os.PathLike, endpoint: Optional[str] = None,
        enable_caching: Optional[bool] = None) -> list[Result]:
    """Every check of CHECKS on the job `template` (a compiled spec) would become."""
    g = GoogleApis(config.vertex.project, endpoint)
    sub = submission(config, template, g.credentials, enable_caching)
    return run_checks(CHECKS, sub, g)


def ensure(config: Config, template: str | os.PathLike, endpoint: Optional[str] = None, skip: bool = False,
           enable_caching: Optional[bool] = None) -> None:
    """What submit and schedule create run on the spec they compiled: print the checks, stop on a failure."""
    if skip:
        print("preflight: skipped (--skip-preflight)")
        return
    stop_if_failed(run(config, template, endpoint, enable_caching))


def cmd_preflight(config: Config, args) -> int:
    if config.vertex is None:
        raise ConfigError("preflight needs a vertex section in the config (see configs/vertex.yaml)")
    if args.spec:
        template = Path(args.spec)
        try:
            job = json.loads(template.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"--spec {args.spec}: not a compiled spec ({e}); write one with "
                              "`python -m pipeline compile`") from None
        if not isinstance(job, dict) or "pipelineSpec" not in job:
            raise ConfigError(f"--spec {args.spec}: no pipelineSpec in it; write one with `python -m pipeline compile`")
    else:
        from pipeline.vertex.compile import compile_pipeline

        template = compile_pipeline(config, args.output)
    return EXIT_FAILED if report(run(config, template, args.preflight_endpoint)) else EXIT_OK
