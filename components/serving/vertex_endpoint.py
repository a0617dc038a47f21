"""Serving on a Vertex AI endpoint: each pushed version is a new version of one Model Registry model (aliased
`challenger`), deployed to the configured endpoint with the canary's share; promote moves `champion` and `default`
to it and gives it all traffic, then undeploys the old champion; rollback gives the champion all traffic again and
undeploys the challenger. Every move is recorded under the serving dir's .vertex/; the callers (the Pusher, pipeline/
serving.py) keep the TF Serving labels there in step (stable = champion, canary = challenger).
Through the real google-cloud-aiplatform v1 clients (gRPC in the cloud, REST to `api_endpoint`, the stand-in
pipeline/dryrun/vertex_endpoints.py, in tests and dry runs). Why and sources: docs/serving.md."""

from __future__ import annotations

import dataclasses
import time
from typing import Optional

from components import gcs
from components.errors import RolloutError, VertexStateMismatch
from components.serving.model_config import Labels
from components.storage import append_record, read_records, storage_for

CHAMPION, CHALLENGER, DEFAULT = "champion", "challenger", "default"
RECORDS_DIR = ".vertex"  # one JSON object per move, created once, never rewritten
OPERATION_TIMEOUT_SECONDS = 1800.0  # a deploy provisions machines: tens of minutes are normal


@dataclasses.dataclass(frozen=True)
class Target:
    """What the endpoint target needs (pipeline/sections/serving.py VertexEndpointSection builds it)."""
    project: str
    region: str
    endpoint: str          # projects/P/locations/R/endpoints/E
    model_id: str          # the registry model's id: projects/P/locations/R/models/<model_id>
    display_name: str
    image_uri: str         # Vertex's prebuilt TensorFlow prediction container
    accept_older_image_tf: bool = False  # pushed although its TensorFlow is older than the exporter's (unchecked)
    machine_type: str = "n1-standard-2"
    canary_percent: int = 10
    min_replicas: int = 1
    max_replicas: int = 1
    api_endpoint: str = ""  # "" : {region}-aiplatform.googleapis.com

    @property
    def model(self) -> str:
        return f"projects/{self.project}/locations/{self.region}/models/{self.model_id}"


@dataclasses.dataclass(frozen=True)
class Served:
    version: int             # the serving dir's version
    model_version_id: str    # the registry version
    deployed_model_id: str   # on the endpoint


@dataclasses.dataclass(frozen=True)
class Record:
    when: str
    action: str                      # push | promote | rollback
    champion: Optional[dict]         # Served as a dict, or None
    challenger: Optional[dict]
    split: dict                      # deployed model id -> percent, as the endpoint has it after the move
    by: str
    note: str = ""

    def served(self, which: str) -> Optional[Served]:
        found = self.champion if which == CHAMPION else self.challenger
        return Served(**found) if found else None


def _clients(target: Target):
    from google.cloud import aiplatform_v1

    options = {"api_endpoint": target.api_endpoint or f"{target.region}-aiplatform.googleapis.com"}
    credentials = None
    if target.api_endpoint.startswith("http://"):  # the loopback stand-in
        from google.auth.credentials import AnonymousCredentials

        credentials = AnonymousCredentials()
    transport = "rest" if target.api_endpoint else None
    return (aiplatform_v1.ModelServiceClient(credentials=credentials, client_options=options, transport=transport),
            aiplatform_v1.EndpointServiceClient(credentials=credentials, client_options=options,
                                                transport=transport))


def records(base: str, gcs_client=None) -> list[Record]:
    return [Record(**r) for r in read_records(storage_for(base, gcs_client), RECORDS_DIR)]


def _latest(base: str) -> Optional[Record]:
    found = records(base)
    return found[-1] if found else None


def _record(base: str, action: str, champion: Optional[Served], challenger: Optional[Served], split: dict,
            by: str, note: str) -> Record:
    record = Record(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), action,
                    dataclasses.asdict(champion) if champion else None,
                    dataclasses.asdict(challenger) if challenger else None, dict(split), by, note)
    append_record(storage_for(base), RECORDS_DIR, dataclasses.asdict(record))
    return record


def upload_version(target: Target, artifact_uri: str, version: int) -> str:
    """A new version of the registry model (the model itself on the first upload), not the default version;
    returns its registry version id. It gets the alias challenger once deployed (deploy_canary): a challenger
    still out keeps it until it is rolled back, and a version that failed to deploy is no challenger."""
    from google.api_core import exceptions as gexc
    from google.cloud import aiplatform_v1

    models, _ = _clients(target)
    try:
        models.get_model(name=target.model)
        parent_model, model_id = target.model, ""
    except gexc.NotFound:
        parent_model, model_id = "", target.model_id
    # A path under the bucket mount (Vertex's /gcs/, a dry run's mapped bucket) is uploaded as its gs:// URI.
    model = aiplatform_v1.Model(display_name=target.display_name, artifact_uri=gcs.api_uri(artifact_uri),
                                version_description=f"serving dir version {version}",
                                container_spec=aiplatform_v1.ModelContainerSpec(image_uri=target.image_uri))
    operation = models.upload_model(request=aiplatform_v1.UploadModelRequest(
        parent=f"projects/{target.project}/locations/{target.region}", model=model, parent_model=parent_model,
        model_id=model_id))
    return operation.result(timeout=OPERATION_TIMEOUT_SECONDS).model_version_id


def deploy_canary(target: Target, base: str, version: int, model_version_id: str, by: str,
                  share: Optional[int] = None, stable: Optional[tuple[int, str]] = None) -> Record:
    """Deploy the challenger with `share` percent (default: the canary's); the champion keeps the rest. With no
    champion deployed yet, or share 100, the challenger gets all traffic and is promoted at once.
    `stable`: (version, directory) of what the serving dir's labels serve as stable. On an endpoint this serving
    dir never pushed to (the target turned on for a serving dir that served before), that version is deployed as
    champion first, so the endpoint serves what the labels say (champion = stable, challenger = canary) instead of
    the new version alone, which every later move would refuse as a disagreement."""
    current = status(target, base)
    share = target.canary_percent if share is None else share
    if current is None and stable is not None and stable[0] != version and share < 100:
        current = _adopt(target, base, stable[0], stable[1], by)
    champion = current.served(CHAMPION) if current else None
    if current is not None and current.challenger:
        champion = rollback(target, base, by, why=f"replaced by version {version}").served(CHAMPION)
    share = 100 if champion is None else share
    models, endpoints = _clients(target)
    split = {"0": share, **({champion.deployed_model_id: 100 - share} if champion and share < 100 else {})}
    new = _deploy(target, endpoints, version, model_version_id, split)
    models.merge_version_aliases(name=f"{target.model}@{model_version_id}", version_aliases=[CHALLENGER])
    record = _record(base, "push", champion, new, _split(endpoints, target),
                     by, f"deployed version {version} at {share}%")
    return promote(target, base, by, why="direct") if share == 100 else record


def _adopt(target: Target, base: str, version: int, directory: str, by: str) -> Record:
    """The serving dir's stable `version`, served before this target was on, as the endpoint's champion: uploaded,
    deployed with all traffic, aliased champion and default."""
    models, endpoints = _clients(target)
    model_version_id = upload_version(target, directory, version)
    served = _deploy_champion(target, models, endpoints, version, model_version_id)
    return _record(base, "push", served, None, _split(endpoints, target), by,
                   f"version {version}, stable before the endpoint target, deployed as champion")


def _deploy(target: Target, endpoints, version: int, model_version_id: str, split: dict) -> Served:
    """Deploy a registry version to the endpoint with `split` ("0": the model being deployed)."""
    from google.cloud import aiplatform_v1

    deployed = aiplatform_v1.DeployedModel(
        model=f"{target.model}@{model_version_id}", display_name=f"{target.display_name}-{version}",
        dedicated_resources=aiplatform_v1.DedicatedResources(
            machine_spec=aiplatform_v1.MachineSpec(machine_type=target.machine_type),
            min_replica_count=target.min_replicas, max_replica_count=target.max_replicas))
    operation = endpoints.deploy_model(endpoint=target.endpoint, deployed_model=deployed, traffic_split=split)
    return Served(version, model_version_id, operation.result(timeout=OPERATION_TIMEOUT_SECONDS).deployed_model.id)


def _deploy_champion(target: Target, models, endpoints, version: int, model_version_id: str) -> Served:
    """Deploy a registry version with all traffic (the split then names it alone) and alias it champion and
    default."""
    served = _deploy(target, endpoints, version, model_version_id, {"0": 100})
    models.merge_version_aliases(name=f"{target.model}@{model_version_id}", version_aliases=[CHAMPION, DEFAULT])
    return served


def promote(target: Target, base: str, by: str, why: str = "") -> Record:
    models, endpoints = _clients(target)
    current = status(target, base)
    challenger = current.served(CHALLENGER) if current else None
    if challenger is None:
        raise RolloutError(f"no challenger is deployed on {target.endpoint}; nothing to promote")
    champion = current.served(CHAMPION)
    endpoints.update_endpoint(endpoint={"name": target.endpoint, "traffic_split": {challenger.deployed_model_id: 100}},
                              update_mask={"paths": ["traffic_split"]})
    models.merge_version_aliases(name=f"{target.model}@{challenger.model_version_id}",
                                 version_aliases=[CHAMPION, DEFAULT, f"-{CHALLENGER}"])
    if champion is not None and champion.deployed_model_id != challenger.deployed_model_id:
        endpoints.undeploy_model(endpoint=target.endpoint, deployed_model_id=champion.deployed_model_id
                                 ).result(timeout=OPERATION_TIMEOUT_SECONDS)
    return _record(base, "promote", challenger, None, _split(endpoints, target), by,
                   f"version {challenger.version} is champion" + (f": {why}" if why else ""))


def rollback(target: Target, base: str, by: str, why: str = "", to: Optional[int] = None) -> Record:
    """Give the champion all traffic again (the split before the challenger), take `challenger` off its registry
    version and undeploy it. With `to` (a version uploaded before): drop a challenger out, then redeploy `to`'s
    registry version with all traffic, make it champion and undeploy the champion it replaces."""
    models, endpoints = _clients(target)
    current = status(target, base)
    challenger = current.served(CHALLENGER) if current else None
    if to is not None:
        if challenger is not None:
            dropped = rollback(target, base, by, why=f"rolling back to version {to}")
            if dropped.served(CHAMPION).version == to:
                return dropped
        return _redeploy(target, base, by, to, why)
    if challenger is None:
        raise RolloutError(f"no challenger is deployed on {target.endpoint}; name the version to roll back to")
    champion = current.served(CHAMPION)
    if champion is None:
        raise RolloutError(f"no champion on {target.endpoint} to give the traffic back to")
    endpoints.undeploy_model(endpoint=target.endpoint, deployed_model_id=challenger.deployed_model_id,
                             traffic_split={champion.deployed_model_id: 100}).result(timeout=OPERATION_TIMEOUT_SECONDS)
    models.merge_version_aliases(name=f"{target.model}@{challenger.model_version_id}",
                                 version_aliases=[f"-{CHALLENGER}"])
    return _record(base, "rollback", champion, None, _split(endpoints, target), by,
                   f"challenger {challenger.version} undeployed" + (f": {why}" if why else ""))


def _redeploy(target: Target, base: str, by: str, to: int, why: str) -> Record:
    models, endpoints = _clients(target)
    current = status(target, base)
    champion = current.served(CHAMPION) if current else None
    if champion is not None and champion.version == to:
        raise RolloutError(f"version {to} is the champion on {target.endpoint} already")
    uploaded = [s for r in records(base) for s in (r.served(CHAMPION), r.served(CHALLENGER)) if s and s.version == to]
    if not uploaded:
        raise RolloutError(f"version {to} was never uploaded to {target.model} (no record in {base}/{RECORDS_DIR})")
    model_version_id = uploaded[-1].model_version_id
    restored = _deploy_champion(target, models, endpoints, to, model_version_id)
    if champion is not None:
        endpoints.undeploy_model(endpoint=target.endpoint, deployed_model_id=champion.deployed_model_id
                                 ).result(timeout=OPERATION_TIMEOUT_SECONDS)
    return _record(base, "rollback", restored, None, _split(endpoints, target), by,
                   f"version {to} redeployed as champion" + (f": {why}" if why else ""))


def _split(endpoints, target: Target) -> dict:
    return dict(endpoints.get_endpoint(name=target.endpoint).traffic_split)


def status(target: Target, base: str) -> Optional[Record]:
    """Our latest record, checked against the endpoint and the registry: VertexStateMismatch (naming both) when the
    endpoint's split or deployed models, or the aliases, are not what we recorded. None before the first push."""
    record = _latest(base)
    if record is None:
        return None
    models, endpoints = _clients(target)
    endpoint = endpoints.get_endpoint(name=target.endpoint)
    live = dict(endpoint.traffic_split)
    if live != record.split:
        raise VertexStateMismatch(f"{target.endpoint} has traffic_split {live}, our record in {base}/{RECORDS_DIR} "
                                  f"says {record.split} ({record.when}, {record.action}); nothing changed")
    deployed = {d.id for d in endpoint.deployed_models}
    for which in (CHAMPION, CHALLENGER):
        served = record.served(which)
        if served is None:
            continue
        if served.deployed_model_id not in deployed:
            raise VertexStateMismatch(f"our record says {which} is deployed model {served.deployed_model_id} on "
                                      f"{target.endpoint}, which deploys {sorted(deployed)}; nothing changed")
        aliases = list(models.get_model(name=f"{target.model}@{served.model_version_id}").version_aliases)
        if which not in aliases:
            raise VertexStateMismatch(f"our record says {which} is {target.model}@{served.model_version_id}, whose "
                                      f"aliases are {aliases}; nothing changed")
    return record


def agreeing(target: Target, base: str, labels: Labels) -> Optional[Record]:
    """status(), when the endpoint serves what TF Serving's labels in `base` say (champion = stable, challenger =
    canary); VertexStateMismatch naming both otherwise, before anything moves: a move on one side alone would leave
    the endpoint's traffic and the labels telling different stories."""
    record = status(target, base)
    served = tuple(record.served(w) if record else None for w in (CHAMPION, CHALLENGER))
    if tuple(s.version if s else None for s in served) != (labels.stable, labels.canary):
        raise VertexStateMismatch(f"{target.endpoint} serves {describe(record)}; the serving labels in {base} say "
                                  f"stable {labels.stable}, canary {labels.canary}: nothing changed")
    return record


def describe(record: Optional[Record]) -> str:
    if record is None:
        return "nothing pushed to the endpoint yet"

    def one(which):
        s = record.served(which)
        return (f"{which}: version {s.version} (registry version {s.model_version_id}, deployed model "
                f"{s.deployed_model_id}, {record.split.get(s.deployed_model_id, 0)}%)" if s else f"{which}: -")
    return f"{one(CHAMPION)}; {one(CHALLENGER)}"

