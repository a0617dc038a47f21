"""A loopback stand-in of the Vertex AI v1 REST routes the endpoint target calls
(components/serving/vertex_endpoint.py),
for the real google-cloud-aiplatform client (REST transport, client_options api_endpoint http://127.0.0.1:PORT).

Routes: models:upload, models.get (name@version), models:mergeVersionAliases, endpoints.get, endpoints.patch
(updateMask trafficSplit), endpoints:deployModel, endpoints:undeployModel, operations.get. Anything else: 404 naming
the route, so a call we did not plan for fails instead of passing.

Rules it enforces (each refused with 400 INVALID_ARGUMENT, or 404 NOT_FOUND for a missing resource, naming the field;
each has a test in tests/test_vertex_endpoint.py). Sources: googleapis/googleapis google/cloud/aiplatform/v1/*.proto
field comments, as the pinned client carries them in google/cloud/aiplatform_v1/types/*.py, and the Model Registry
page https://cloud.google.com/vertex-ai/docs/model-registry/model-alias ("alias page").

Rule (source):
1. A traffic split's percentages add up to 100, or the map is empty (endpoint.proto Endpoint.traffic_split;
   endpoint_service.proto DeployModelRequest.traffic_split, "must add up to 100").
2. A split names only DeployedModel ids of that endpoint; "0" is the one being deployed, in deployModel only
   (Endpoint.traffic_split, "A map from a DeployedModel's ID"; DeployModelRequest.traffic_split). What the service
   does with an unknown id is not documented: refused (fail closed).
3. A deployed model is undeployed only if it has no traffic, or the request's split takes its traffic away
   (endpoint_service.proto UndeployModelRequest.traffic_split).
4. An alias names one version of a model; giving it to another version removes it from the first (alias page:
   "unique within a model resource"; an existing alias applied to another version is removed from that one).
5. Exactly one version carries `default`: the first version gets it; it can't be removed (`-default`), only moved
   (model.proto Model.version_aliases, "there must be exactly one default version alias"; alias page).
6. An alias matches [a-z][a-zA-Z0-9-]{0,126}[a-z0-9]; a `-` prefix removes it in mergeVersionAliases
   (Model.version_aliases; model_service.proto MergeVersionAliasesRequest.version_aliases).
7. Upload with parent_model: that model must exist; the upload is a new version of it
   (model_service.proto UploadModelRequest.parent_model).
8. Upload, deploy and undeploy are long-running: they answer a google.longrunning.Operation, here done at once with
   its response, also readable by operations.get (model_service.proto UploadModel; endpoint_service.proto
   DeployModel, UndeployModel).
9. deployModel's model names an existing model version; dedicated resources need a machine type and
   min_replica_count >= 1 (endpoint.proto DeployedModel.model; machine_resources.proto DedicatedResources,
   "must be greater than or equal to 1"); max_replica_count below min is not documented either way: refused.
10. Upload's model.artifactUri is a gs:// directory. model.proto says only "the path to the directory containing
   the Model artifact"; Vertex's serving containers read it from Cloud Storage and every Google sample passes a
   gs:// URI (https://cloud.google.com/vertex-ai/docs/samples/aiplatform-upload-model-sample): a local path, which
   a dry run's mapped serving dir would send unless converted, is refused (fail closed).

Not modelled: etags, IAM, quotas, operation metadata, models deployed on other endpoints, pagination.

With a state file (the dry run's, `<local dir>/vertex-endpoints/state.json`) each request reads the service's state
and writes it back under the file's lock, so the dry runs and serving commands on one directory, one after another
or together, see one registry and endpoint, as they would see one on Google Cloud.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import threading
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import unquote

from pipeline.dryrun.json_server import JsonServer
from pipeline.errors import StandInRefused

ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]$")
DEFAULT = "default"
_LOC = r"projects/[^/]+/locations/[^/]+"
_TYPES = "type.googleapis.com/google.cloud.aiplatform.v1."


class VertexEndpoints(JsonServer):
    """Registry models and endpoints, in memory or kept in `state`. `add_endpoint` creates an endpoint (we never
    create one: the config names an existing endpoint)."""

    def __init__(self, state: Optional[Path] = None):
        self.state = state
        self.models: dict[str, dict] = {}     # model resource name -> {"displayName", "versions": {id: version}}
        self.endpoints: dict[str, dict] = {}  # endpoint resource name -> {"deployedModels": [...], "trafficSplit"}
        self.operations: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict]] = []  # this process's only
        self._lock = threading.Lock()
        self._ids = 1000

    def add_endpoint(self, name: str) -> bool:
        """Whether it was created (False: it exists)."""
        with self._held():
            if name in self.endpoints:
                return False
            self.endpoints[name] = {"name": name, "displayName": name.rsplit("/", 1)[-1], "deployedModels": [],
                                    "trafficSplit": {}}
            return True

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """The service's state for one request: read from `state` under its lock and written back after."""
        with self._lock:
            if self.state is None:
                yield
                return
            self.state.parent.mkdir(parents=True, exist_ok=True)
            with open(self.state.with_name(self.state.name + ".lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if self.state.exists():
                    kept = json.loads(self.state.read_text())
                    self.models, self.endpoints = kept["models"], kept["endpoints"]
                    self.operations, self._ids = kept["operations"], kept["ids"]
                try:
                    yield
                finally:
                    written = self.state.with_name(self.state.name + ".tmp")
                    written.write_text(json.dumps({"models": self.models, "endpoints": self.endpoints,
                                                   "operations": self.operations, "ids": self._ids}, indent=1))
                    os.replace(written, self.state)

    # --- HTTP (pipeline/dryrun/json_server.py) ----------------------------------------------------------------
    def _serve(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        return self.serve(method, unquote(path), query, body)  # the client escapes the "@" of models/M@VERSION

    def serve(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        routes = [
            ("POST", rf"/v1/(?P<parent>{_LOC})/models:upload$", self._upload),
            ("GET", rf"/v1/(?P<name>{_LOC}/models/[^/:]+)$", self._get_model),
            ("POST", rf"/v1/(?P<name>{_LOC}/models/[^/:]+):mergeVersionAliases$", self._merge_aliases),
            ("GET", rf"/v1/(?P<name>{_LOC}/endpoints/[^/:]+)$", self._get_endpoint),
            ("PATCH", rf"/v1/(?P<name>{_LOC}/endpoints/[^/:]+)$", self._patch_endpoint),
            ("POST", rf"/v1/(?P<name>{_LOC}/endpoints/[^/:]+):deployModel$", self._deploy),
            ("POST", rf"/v1/(?P<name>{_LOC}/endpoints/[^/:]+):undeployModel$", self._undeploy),
            ("GET", rf"/v1/(?P<name>{_LOC}/operations/[^/:]+)$", self._get_operation),
        ]
        with self._held():
            self.requests.append((method, path, body))
            for verb, regex, handler in routes:
                m = re.match(regex, path)
                if m and verb == method:
                    try:
                        return 200, handler(query, body, **m.groupdict())
                    except StandInRefused as e:
                        return self.error(e.status, str(e))
        return self.error(404, f"vertex_endpoints has no route for {method} {path}")

    # --- the registry -----------------------------------------------------------------------------------------
    def _next_id(self) -> str:
        self._ids += 1
        return str(self._ids)

    def _operation(self, location: str, kind: str, response: dict) -> dict:
        name = f"{location}/operations/{self._next_id()}"
        op = {"name": name, "done": True, "response": {"@type": _TYPES + kind, **response}}
        self.operations[name] = op
        return op

    def _get_operation(self, query, body, name):
        if name not in self.operations:
            raise StandInRefused(404, f"Operation {name} not found")
        return self.operations[name]

    def _model(self, name: str) -> tuple[dict, Optional[dict]]:
        """(model, version or None) of `models/M` or `models/M@VERSION_ID_OR_ALIAS`."""
        base, _, ref = name.partition("@")
        model = self.models.get(base)
        if model is None:
            raise StandInRefused(404, f"Model {base} not found")
        if not ref:
            return model, None
        for vid, version in model["versions"].items():
            if ref == vid or ref in version["versionAliases"]:
                return model, version
        raise StandInRefused(404, f"Model {name}: no version {ref!r}")

    @staticmethod
    def _check_alias(alias: str, field: str) -> None:
        if not ALIAS.match(alias):
            raise StandInRefused(400, f"{field}: alias {alias!r} does not match [a-z][a-zA-Z0-9-]{{0,126}}[a-z0-9]")

    @staticmethod
    def _give(model: dict, version: dict, alias: str) -> None:
        for other in model["versions"].values():  # an alias names one version of a model: moving it
            if alias in other["versionAliases"] and other is not version:
                other["versionAliases"].remove(alias)
        if alias not in version["versionAliases"]:
            version["versionAliases"].append(alias)

    def _upload(self, query, body, parent):
        sent = body.get("model") or {}
        for field in ("displayName",):
            if not sent.get(field):
                raise StandInRefused(400, f"model.{field} is required")
        if not (sent.get("containerSpec") or {}).get("imageUri"):
            raise StandInRefused(400, "model.containerSpec.imageUri is required for a custom-trained model")
        if not str(sent.get("artifactUri", "")).startswith("gs://"):
            raise StandInRefused(400, f"model.artifactUri {sent.get('artifactUri')!r}: a gs:// directory (rule 10)")
        aliases = list(sent.get("versionAliases") or [])
        for alias in aliases:
            self._check_alias(alias, "model.versionAliases")
        if body.get("parentModel"):
            model, _ = self._model(body["parentModel"])
            name = body["parentModel"]
        else:
            name = f"{parent}/models/{body.get('modelId') or self._next_id()}"
            if name in self.models:
                raise StandInRefused(409, f"Model {name} already exists; upload a version with parent_model")
            model = self.models[name] = {"displayName": sent["displayName"], "versions": {}}
        vid = str(len(model["versions"]) + 1)
        version = {**sent, "name": name, "versionId": vid, "versionAliases": []}
        model["versions"][vid] = version
        if len(model["versions"]) == 1:
            aliases = [DEFAULT, *[a for a in aliases if a != DEFAULT]]  # the first version carries default
        for alias in aliases:
            self._give(model, version, alias)
        return self._operation(parent, "UploadModelResponse", {"model": name, "modelVersionId": vid})

    def _get_model(self, query, body, name):
        model, version = self._model(name)
        if version is None:
            version = next(v for v in model["versions"].values() if DEFAULT in v["versionAliases"])
        return version

    def _merge_aliases(self, query, body, name):
        model, version = self._model(name)
        if version is None:
            raise StandInRefused(400, f"name {name}: mergeVersionAliases needs a version (models/M@VERSION)")
        aliases = list(body.get("versionAliases") or [])
        if not aliases:
            raise StandInRefused(400, "version_aliases is required")
        for alias in aliases:
            self._check_alias(alias.removeprefix("-"), "version_aliases")
            if alias == f"-{DEFAULT}":
                raise StandInRefused(400, "version_aliases: -default: one version must carry the default alias at all "
                                   "times; give default to another version instead")
        for alias in aliases:
            if alias.startswith("-"):
                if alias[1:] in version["versionAliases"]:
                    version["versionAliases"].remove(alias[1:])
            else:
                self._give(model, version, alias)
        return version

    # --- endpoints --------------------------------------------------------------------------------------------
    def _endpoint(self, name: str) -> dict:
        if name not in self.endpoints:
            raise StandInRefused(404, f"Endpoint {name} not found")
        return self.endpoints[name]

    @staticmethod
    def _check_split(split: dict, deployed: set[str], field: str) -> dict:
        split = {k: int(v) for k, v in split.items()}
        unknown = sorted(set(split) - deployed)
        if unknown:
            raise StandInRefused(400, f"{field} names {', '.join(unknown)}, not a DeployedModel of this endpoint "
                               f"(deployed: {', '.join(sorted(deployed)) or 'none'})")
        if any(v < 0 for v in split.values()) or (split and sum(split.values()) != 100):
            raise StandInRefused(400, f"{field} percentages add up to {sum(split.values())}; they must add up to 100")
        return split

    def _get_endpoint(self, query, body, name):
        return self._endpoint(name)

    def _patch_endpoint(self, query, body, name):
        endpoint = self._endpoint(name)
        mask = [m.strip() for m in ",".join(query.get("updateMask") or []).split(",") if m.strip()]
        if not mask:
            raise StandInRefused(400, "update_mask is required")
        for field in mask:
            if field not in ("trafficSplit", "traffic_split"):
                raise StandInRefused(400, f"update_mask: {field} is not updatable here "
                                          "(the stand-in updates trafficSplit)")
        deployed = {d["id"] for d in endpoint["deployedModels"]}
        endpoint["trafficSplit"] = self._check_split(body.get("trafficSplit") or {}, deployed, "traffic_split")
        return endpoint

    def _deploy(self, query, body, name):
        endpoint = self._endpoint(name)
        deployed = dict(body.get("deployedModel") or {})
        if not deployed.get("model"):
            raise StandInRefused(400, "deployed_model.model is required")
        model, version = self._model(deployed["model"])
        resources = deployed.get("dedicatedResources") or {}
        low, high = int(resources.get("minReplicaCount") or 0), int(resources.get("maxReplicaCount") or 0)
        if low < 1:
            raise StandInRefused(400, "deployed_model.dedicated_resources.min_replica_count must be at least 1")
        if high and high < low:
            raise StandInRefused(400, f"deployed_model.dedicated_resources.max_replica_count {high} is below "
                               f"min_replica_count {low}")
        if not (resources.get("machineSpec") or {}).get("machineType"):
            raise StandInRefused(400, "deployed_model.dedicated_resources.machine_spec.machine_type is required")
        ids = {d["id"] for d in endpoint["deployedModels"]}
        split = self._check_split(body.get("trafficSplit") or {}, ids | {"0"}, "traffic_split")
        new_id = self._next_id()
        version = version or self._get_model({}, {}, deployed["model"])
        entry = {**deployed, "id": new_id, "model": version["name"], "modelVersionId": version["versionId"]}
        endpoint["deployedModels"].append(entry)
        if split:
            endpoint["trafficSplit"] = {(new_id if k == "0" else k): v for k, v in split.items()}
        elif not ids:  # the first deployed model of an endpoint gets all its traffic
            endpoint["trafficSplit"] = {new_id: 100}
        return self._operation(name.rsplit("/endpoints/", 1)[0], "DeployModelResponse", {"deployedModel": entry})

    def _undeploy(self, query, body, name):
        endpoint = self._endpoint(name)
        target = body.get("deployedModelId") or ""
        ids = {d["id"] for d in endpoint["deployedModels"]}
        if target not in ids:
            raise StandInRefused(404, f"deployed_model_id {target!r} is not deployed on {name}")
        split = endpoint["trafficSplit"]
        if body.get("trafficSplit"):
            split = self._check_split(body["trafficSplit"], ids, "traffic_split")
        if split.get(target, 0) > 0 and len(ids) > 1:
            raise StandInRefused(400, f"deployed model {target} still has {split[target]}% of {name}'s traffic_split; "
                               "move its traffic first or pass a traffic_split that takes it away")
        endpoint["deployedModels"] = [d for d in endpoint["deployedModels"] if d["id"] != target]
        endpoint["trafficSplit"] = {k: v for k, v in split.items() if k != target} if len(ids) > 1 else {}
        return self._operation(name.rsplit("/endpoints/", 1)[0], "UndeployModelResponse", {})
