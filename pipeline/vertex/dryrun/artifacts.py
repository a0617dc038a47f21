"""The artifacts earlier dry runs produced, and the resolver queries TFX compiles against them.

On Vertex, a resolver task is no container: the service runs the task's
`outputArtifactQueries` filters against Vertex ML Metadata and hands the
latest match on. Here the metadata is a JSON index of every artifact the dry
runs of this directory produced (resource name, schema title, gs:// URI,
metadata, state), and the filters are the grammar TFX 1.16's step_builder.py
emits for LatestBlessedModelStrategy and LatestArtifactStrategy:

    clause AND clause ...      with clause one of
    schema_title="<title>"   state=<STATE>   name="<resource name>"
    metadata.<key>.number_value=<number> | .string_value="<text>" | .bool_value=<true|false>

Placeholders in a filter (`{{$.inputs.artifacts['input'].metadata[...]}}`)
are resolved by kfp.local's placeholder code first. Anything else is an error
naming the filter, never a query that silently matches nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from kfp.local import placeholder_utils

from pipeline.vertex.dryrun.invocation import unresolved_placeholders
from pipeline.vertex.dryrun.spec import SpecError, Task, schema_title

LIVE = "LIVE"
_VALUE = r'"(?:[^"\\]|\\.)*"|[^\s"]+'
_CLAUSE = (r"(?P<field>schema_title|state|name|metadata\.(?P<key>[A-Za-z0-9_]+)\."
           r"(?P<kind>number_value|string_value|bool_value))=(?P<value>" + _VALUE + ")")


def _unnamed(pattern: str) -> str:
    return re.sub(r"\?P<\w+>", "?:", pattern)


_WHOLE = re.compile(rf"^\s*{_unnamed(_CLAUSE)}(?:\s+AND\s+{_unnamed(_CLAUSE)})*\s*$")
_ONE = re.compile(_CLAUSE)


class ArtifactIndex:
    """Every artifact the dry runs of one directory produced, oldest first; one JSON file."""

    def __init__(self, path: Path, resource_prefix: str):
        self.path = path
        self.prefix = resource_prefix  # projects/<p>/locations/<r>/metadataStores/default
        data = json.loads(path.read_text()) if path.exists() else {"next_id": 1, "artifacts": []}
        self.next_id: int = data["next_id"]
        self.artifacts: list[dict[str, Any]] = data["artifacts"]

    def new_name(self) -> str:
        name = f"{self.prefix}/artifacts/{self.next_id}"
        self.next_id += 1
        return name

    def add(self, artifacts: dict[str, list[dict[str, Any]]], pipeline: str, job_id: str, task: str) -> None:
        known = {a["name"] for a in self.artifacts}
        for key, items in artifacts.items():
            for artifact in items:
                if artifact["name"] not in known:
                    self.artifacts.append({"name": artifact["name"], "schemaTitle": schema_title(artifact["type"]),
                                           "uri": artifact.get("uri", ""), "metadata": artifact.get("metadata", {}),
                                           "type": artifact["type"], "state": LIVE, "pipeline": pipeline,
                                           "job": job_id, "task": task, "key": key})

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"next_id": self.next_id, "artifacts": self.artifacts}, indent=1))
        tmp.replace(self.path)

    def latest(self, query: str, pipeline: str) -> Optional[dict[str, Any]]:
        """The newest artifact of `pipeline` matching the (placeholder-free) filter."""
        clauses = parse_filter(query)
        matches = [a for a in self.artifacts if a["pipeline"] == pipeline and all(c(a) for c in clauses)]
        return matches[-1] if matches else None


def parse_filter(query: str) -> list:
    if not _WHOLE.match(query):
        raise ValueError(f"not in the filter grammar TFX emits (clauses joined by AND: schema_title=, state=, "
                         f"name=, metadata.<key>.<number_value|string_value|bool_value>=): {query!r}")
    return [_predicate(m) for m in _ONE.finditer(query)]


def _predicate(match: re.Match):
    raw = match["value"]
    text = json.loads(raw) if raw.startswith('"') else raw
    field = match["field"]
    if field == "schema_title":
        return lambda a: a["schemaTitle"] == text
    if field == "state":
        return lambda a: a["state"] == text
    if field == "name":
        return lambda a: a["name"] == text
    key, kind = match["key"], match["kind"]
    if kind == "number_value":
        number = float(text)
        return lambda a: isinstance(a["metadata"].get(key), (int, float)) and float(a["metadata"][key]) == number
    if kind == "bool_value":
        if text not in ("true", "false"):
            raise ValueError(f"bool_value must be true or false, got {text!r}")
        return lambda a: a["metadata"].get(key) is (text == "true")
    return lambda a: a["metadata"].get(key) == text


def resolve(task: Task, inputs: dict[str, list[dict[str, Any]]], index: ArtifactIndex,
            pipeline: str) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The resolver task's outputs (the latest match per query, or none) and a line per query for the log."""
    queries = task.executor["resolver"].get("outputArtifactQueries", {})
    outputs, lines = {}, []
    view = {"inputs": {"artifacts": {k: {"artifacts": v} for k, v in inputs.items()}}}
    for key, query in queries.items():
        field = task.executor_field("resolver.outputArtifactQueries", key, "filter")
        text = query.get("filter", "")
        if any(not items for items in inputs.values()):
            # The filter refers to an input that resolved to nothing (a first run): no baseline.
            outputs[key], found = [], None
        else:
            missing = unresolved_placeholders(text, view)
            if missing:
                raise SpecError(f"{field}: placeholder {missing[0]} does not resolve from the task's inputs")
            try:
                resolved = placeholder_utils.resolve_io_placeholders(view, text)
                found = index.latest(resolved, pipeline)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise SpecError(f"{field}: {e}") from None
            outputs[key] = [_as_input(found)] if found else []
        lines.append(f"{key}: {found['name'] if found else 'nothing found'} ({text})")
    return outputs, lines


def _as_input(record: dict[str, Any]) -> dict[str, Any]:
    return {"name": record["name"], "uri": record["uri"], "metadata": record["metadata"], "type": record["type"]}
