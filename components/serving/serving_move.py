"""Promote or roll back what serves: with serving.target vertex_endpoint the endpoint first, then TF Serving's labels
in step (stable = champion, canary = challenger); the labels alone otherwise. One place for the order, so the
command (pipeline/serving.py) and the run's first step (components/serving/canary_check_component.py) cannot drift
apart.
The caller holds the root (its lock, or the run lease). Why: docs/serving.md."""

from __future__ import annotations

from typing import Optional

from components.errors import RolloutError
from components.serving import rollout, serving_dir, vertex_endpoint
from components.serving.model_config import Labels


def move(base: str, model_name: str, action: str, by: str, target: Optional[vertex_endpoint.Target] = None,
         to: Optional[int] = None, why: str = "", reload: rollout.Reload = rollout.NO_SERVER) -> rollout.Event:
    """`action` promote or rollback (to `to`, or as rollout.rolled_back_to chooses); `reload`: the servers of
    models.config. Raises RolloutError, ServingConfigChanged or VertexStateMismatch with nothing moved when the first
    move is refused."""
    if action not in ("promote", "rollback"):
        raise RolloutError(f"unknown serving move {action!r}: promote or rollback")
    if target is not None:
        current = rollout.labels(base)
        vertex_endpoint.agreeing(target, base, current)
        moved = (vertex_endpoint.promote(target, base, by, why=why) if action == "promote"
                 else vertex_endpoint.rollback(target, base, by, why=why, to=_back_to(base, to, current)))
        by = f"{by}; vertex endpoint: {moved.note}"
    if action == "promote":
        return rollout.promote(base, model_name, by, why=why, reload=reload)
    return rollout.rollback(base, model_name, by, to, why=why, reload=reload)


def _back_to(base: str, to: Optional[int], current: Labels) -> Optional[int]:
    """The version a rollback on the endpoint redeploys, as the labels' rollback chooses it; None: drop the
    canary. Refused before the endpoint moves."""
    back = rollout.rolled_back_to(base, to, current=current)
    if back is not None and back not in {v.number for v in serving_dir.versions(base)}:
        raise RolloutError(f"version {back} is not in {base}; nothing changed")
    return back
