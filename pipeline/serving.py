"""`python -m pipeline serving status | promote | rollback [--to VERSION]`: what serves under each label, and moving
the labels (components/serving/rollout.py) under the root's lock. Why and sources: docs/serving.md."""

from __future__ import annotations

from typing import Optional

from components import training_record
from components.coordination.lease import default_owner
from components.errors import RolloutError, ServingConfigChanged, VertexStateMismatch
from components.serving import rollout, serving_dir, serving_move, vertex_endpoint
from pipeline.config import Config
from pipeline.errors import CommandFailed
from pipeline.local.lock import run_lock

RECENT_MOVES = 10


def describe_version(base: str, version: Optional[int]) -> str:
    """A version with its training record: spans, rows, main metric, when pushed, by which run."""
    if version is None:
        return "-"
    record = training_record.read(base, str(version))
    if record is None:
        return f"{version} (no training record: pushed before records were kept)"
    metric = f"{record.metric[0]} {record.metric[1]:.4f}" if record.metric else "metric -"
    return (f"{version}: spans {','.join(record.spans) or '(flat)'}, {record.snapshot_rows or '?'} rows, {metric}, "
            f"pushed {record.written or '?'} by {record.run or '?'}")


def status(config: Config) -> str:
    base = config.pipeline.serving_dir
    labels = rollout.labels(base)
    on_disk = [v.number for v in serving_dir.versions(base)]
    lines = [f"serving dir: {base} (serving.rollout: {config.serving.rollout})",
             f"  stable: {describe_version(base, labels.stable)}",
             f"  canary: {describe_version(base, labels.canary) if labels.canary is not None else '- (none out)'}",
             f"versions on disk: {', '.join(map(str, on_disk)) or 'none'}"]
    endpoint = endpoint_target(config)
    if endpoint is not None:
        try:
            lines.append(f"vertex endpoint {endpoint.endpoint}: "
                         f"{vertex_endpoint.describe(vertex_endpoint.agreeing(endpoint, base, labels))}")
        except VertexStateMismatch as e:
            raise CommandFailed(str(e)) from None
    moves = rollout.events(base)
    if moves:
        lines.append(f"label moves (latest {min(len(moves), RECENT_MOVES)} of {len(moves)}):")
        lines.extend(f"  {e.describe()}" for e in moves[-RECENT_MOVES:])
    return "\n".join(lines)


def endpoint_target(config: Config) -> Optional[vertex_endpoint.Target]:
    fields = config.serving.endpoint_target(config.vertex, config.pipeline.name)
    return vertex_endpoint.Target(**fields) if fields else None


def move(config: Config, action: str, to: Optional[int] = None, wait_seconds: float = 60.0) -> str:
    """promote or rollback, holding the root's lock (a push moves labels under it too)."""
    base, name = config.pipeline.serving_dir, config.pipeline.name
    by = f"python -m pipeline serving {action} ({default_owner()})"
    with run_lock(config.pipeline.root_uri, wait_seconds):
        try:
            event = serving_move.move(base, name, action, by, endpoint_target(config), to,
                                      reload=rollout.Reload(config.serving.model_config_poll_seconds))
        except (RolloutError, ServingConfigChanged, VertexStateMismatch) as e:
            raise CommandFailed(str(e)) from None
    return f"{action}: {event.describe()}\n{status(config)}"
