"""Preflight for `pipeline.target: kubeflow`: the KFP API server, the bucket and the image, checked from this
machine, one line per check; what can't be checked from here says so ("?"). (docs/internals.md)"""

from __future__ import annotations

from typing import Optional

from pipeline.cloud import images
from pipeline.cloud.access import bucket_writes, check_accounts, option_needs
from pipeline.cloud.preflight import FAIL, OK, UNKNOWN, Result, report, run_checks, stop_if_failed
from pipeline.config import Config
from pipeline.errors import EXIT_FAILED, EXIT_OK, CommandFailed, ConfigError, KubeflowError
from pipeline.kubeflow.client import MIN_BACKEND_VERSION, check_server, read_token, require_version, version_text


def _api(config: Config) -> list[Result]:
    kf = config.kubeflow
    try:
        health = check_server(config, read_token(config))
    except KubeflowError as e:
        return [Result(FAIL, f"KFP API {kf.host}", str(e), "check kubeflow.host, the port-forward and the token")]
    mode = "multi-user" if health.multi_user else "single-user"
    results = [Result(OK, f"KFP API {kf.host}", f"answers ({mode})")]
    try:
        require_version(health, kf.host)
        results.append(Result(OK, "KFP backend version", f"{health.tag_name} (the spec needs "
                              f"{version_text(MIN_BACKEND_VERSION)} or later)"))
    except KubeflowError as e:
        results.append(Result(FAIL, "KFP backend version", str(e), "docs/kubeflow.md, \"Backend version\""))
    if health.multi_user and kf.namespace == "kubeflow":
        results.append(Result(FAIL, "kubeflow.namespace", "multi-user Kubeflow runs pipelines in profile namespaces, "
                              "not in kubeflow", "set kubeflow.namespace to your profile's namespace"))
    return results


def _bucket(config: Config, g) -> list[Result]:
    name = config.pipeline.root_uri[len("gs://"):].split("/", 1)[0]
    if g.storage().lookup_bucket(name) is None:
        return [Result(FAIL, f"bucket gs://{name}", "does not exist (pipeline.root)", "create it or fix pipeline.root")]
    account = config.kubeflow.service_account or "pipeline-runner"
    if config.kubeflow.google_service_account:
        unchecked = (f"whether the Kubernetes service account {account} acts as "
                     f"{config.kubeflow.google_service_account} (its Workload Identity binding) is not checked from "
                     "here (infra/kubeflow/)")
    else:
        unchecked = (f"whether the pods may write it is not checked from here: the Kubernetes service account "
                     f"{account} must be bound with Workload Identity to a Google service account with "
                     "roles/storage.objectUser on it (infra/kubeflow/); set kubeflow.google_service_account to check")
    return [Result(OK, f"bucket gs://{name}", "exists"), Result(UNKNOWN, f"bucket gs://{name}", unchecked)]


# Where the pods' account gets each grant: the module's variable for each enabled option (pubsub_topic,
# vertex_endpoint, canary_check_metrics; docs/kubeflow.md).
TERRAFORM = "infra/kubeflow's `terraform apply` with the variable of each enabled option"
_FIELD = "kubeflow.google_service_account"


def _account(config: Config, g) -> list[Result]:
    """What the run's pods do as their Google account, asked of Policy Troubleshooter: the bucket, and each enabled
    option's calls (a Pub/Sub publish, the Vertex endpoint, Cloud Monitoring), which would otherwise fail mid-run
    with PERMISSION_DENIED (a notification logged and lost; a push published but not deployed)."""
    account = config.kubeflow.google_service_account
    if not account:
        options = option_needs(config, _FIELD, "")
        needed = "; ".join(f"{n.permission} to {n.what}" for n in options)
        return [Result(UNKNOWN, "the pods' Google service account", "not checked: kubeflow.google_service_account "
                       "is not set" + (f" (the run needs {needed})" if needed else ""),
                       "set it to infra/kubeflow's output google_service_account")]
    return check_accounts(g, [*bucket_writes(config, _FIELD, account), *option_needs(config, _FIELD, account)],
                          TERRAFORM)


def _image(config: Config, g) -> list[Result]:
    image = config.kubeflow.pipeline_image
    ref = images.parse(image)
    if ref is None:
        return [Result(UNKNOWN, f"image {image}", "not in Artifact Registry; not checked")]
    from google.api_core import exceptions as gexc

    try:
        g.get("artifactregistry", f"/v1/{ref.api_path}")
    except gexc.NotFound:
        return [Result(FAIL, f"image {image}", "not found in Artifact Registry",
                       "build and push it (infra/cloudbuild.yaml) or fix kubeflow.pipeline_image")]
    return [Result(OK, f"image {image}", "exists")]


def run(config: Config, endpoint: Optional[str] = None) -> list[Result]:
    from pipeline.cloud.google_apis import GoogleApis

    results = _api(config)
    ref = images.parse(config.kubeflow.pipeline_image)
    try:
        g = GoogleApis(ref.project if ref else "", endpoint)
    except CommandFailed as e:  # no Application Default Credentials
        return [*results, Result(UNKNOWN, "Google Cloud", f"not checked: {e}")]
    return [*results, *run_checks((("bucket", _bucket), ("image", _image), ("service account", _account)), config,
                                  g)]


def ensure(config: Config, skip: bool = False, endpoint: Optional[str] = None) -> None:
    """What submit and schedule create run first: print the checks, stop on a failure."""
    if skip:
        print("preflight: skipped (--skip-preflight)")
        return
    stop_if_failed(run(config, endpoint))


def cmd_preflight(config: Config, args) -> int:
    if getattr(args, "spec", None):
        # Silently ignoring it would look like the spec passed.
        raise ConfigError("preflight --spec: the Kubeflow preflight checks the cluster, the bucket and the image, "
                          "not a spec; `python -m pipeline dryrun --backend kubeflow --spec FILE` checks a spec "
                          "against the open-source backend's rules")
    return EXIT_FAILED if report(run(config, args.preflight_endpoint)) else EXIT_OK
