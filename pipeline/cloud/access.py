"""What a run's Google service account must be allowed to do, where, and asking Policy Troubleshooter whether it
may: the needs both targets share (the bucket, and what each enabled option calls) and the check itself.
Why and sources: docs/internals.md; the Kubeflow account's grants: infra/kubeflow/."""

from __future__ import annotations

import dataclasses
from typing import Optional

from pipeline.cloud.preflight import API_ERRORS, FAIL, OK, UNKNOWN, Result, short


@dataclasses.dataclass(frozen=True)
class Need:
    field: str  # the config field naming the account
    account: str
    permission: str
    resource: str  # full resource name (//service/...)
    what: str  # for people: why the step needs it
    object_name: Optional[str] = None  # projects/_/buckets/B/objects/NAME, for conditions on resource.name
    grant: str = ""  # the role that gives it, for the fix


def _object(uri: str, leaf: str) -> tuple[str, str]:
    """(full resource name, condition resource name) of an object `leaf` under gs:// `uri`."""
    bucket, _, prefix = uri[len("gs://"):].partition("/")
    name = f"projects/_/buckets/{bucket}/objects/{'/'.join(p for p in (prefix, leaf) if p)}"
    return f"//storage.googleapis.com/{name}", name


def writes(field: str, account: str, uri: str, what: str, grant: str) -> Need:
    resource, name = _object(uri, "preflight-probe")
    return Need(field, account, "storage.objects.create", resource, f"{what} ({uri}/)", name, grant)


def bucket_writes(config, field: str, account: str) -> list[Need]:
    """What every pipeline step's account writes in the bucket."""
    p, writer = config.pipeline, "roles/storage.objectUser on the bucket"
    return [writes(field, account, p.pipeline_root, "write step outputs", writer),
            writes(field, account, config.snapshots_root, "write dataset snapshots", writer),
            writes(field, account, p.serving_dir, "push blessed models", writer)]


def option_needs(config, field: str, account: str) -> list[Need]:
    """What the enabled options call as the pipeline's account: the run's outcome published to a Pub/Sub topic
    (notify.pubsub_topic), each push uploaded to the Model Registry and deployed to the endpoint (serving.target
    vertex_endpoint; ModelService.UploadModel, EndpointService.DeployModel), and the run's first step reading the
    endpoint's series (serving.check.before_run there; MetricService.ListTimeSeries)."""
    out = []
    topic = config.notify.pubsub_topic if config.notify is not None else None
    if topic:
        out.append(Need(field, account, "pubsub.topics.publish", f"//pubsub.googleapis.com/{topic}",
                        "publish each run's outcome (notify.pubsub_topic)",
                        grant="roles/pubsub.publisher on the topic"))
    endpoint = config.serving.endpoint_target(config.vertex, config.pipeline.name)
    if endpoint is not None:
        project = f"//cloudresourcemanager.googleapis.com/projects/{endpoint['project']}"
        out += [Need(field, account, "aiplatform.models.upload", project, "upload each push to the Model Registry "
                     "(serving.target vertex_endpoint)", grant="roles/aiplatform.user"),
                Need(field, account, "aiplatform.endpoints.deploy", project, "deploy it to the endpoint",
                     grant="roles/aiplatform.user")]
        if config.serving.check.before_run:
            out.append(Need(field, account, "monitoring.timeSeries.list", project, "read the endpoint's series "
                            "(serving.check.before_run)", grant="a role with monitoring.timeSeries.list (the "
                            "Terraform's metrics reader)"))
    return out


def check_accounts(g, needs: list[Need], terraform: str) -> list[Result]:
    """One line per account: whether Policy Troubleshooter finds it may do each of its needs. `terraform`: what
    grants them, for the fix."""
    by_account: dict[tuple[str, str], list[tuple[Need, str]]] = {}
    unavailable: Optional[str] = None
    for need in needs:
        if unavailable is None:
            try:
                state = _troubleshoot(g, need)
            except API_ERRORS as e:
                unavailable = f"Policy Troubleshooter: {short(e)}"
        by_account.setdefault((need.field, need.account), []).append((need, unavailable or state))
    return [_account_result(field, account, answers, terraform) for (field, account), answers in by_account.items()]


def _troubleshoot(g, need: Need) -> str:
    query = {"principal": need.account, "fullResourceName": need.resource, "permission": need.permission}
    if need.object_name:
        query["conditionContext"] = {"resource": {"service": "storage.googleapis.com", "name": need.object_name,
                                                  "type": "storage.googleapis.com/Object"}}
    answer = g.post("policytroubleshooter", "/v3/iam:troubleshoot", {"accessTuple": query})
    return answer.get("overallAccessState", "OVERALL_ACCESS_STATE_UNSPECIFIED")


def _account_result(field: str, account: str, answers: list[tuple[Need, str]], terraform: str) -> Result:
    check = f"{account} ({field})"
    denied = [n for n, state in answers if state == "CANNOT_ACCESS"]
    unknown = [(n, state) for n, state in answers if state not in ("CAN_ACCESS", "CANNOT_ACCESS")]
    if denied:
        return Result(FAIL, check, "may not " + "; ".join(f"{n.what} ({n.permission})" for n in denied),
                      "grant " + "; ".join(sorted({n.grant for n in denied})) + f" ({terraform} does)")
    if unknown:
        reasons = sorted({state for _, state in unknown})
        return Result(UNKNOWN, check, f"could not check {len(unknown)} of {len(answers)} needs ({', '.join(reasons)})",
                      "Policy Troubleshooter needs its API enabled and roles/iam.securityReviewer for you")
    return Result(OK, check, "may " + "; ".join(n.what for n, _ in answers))
