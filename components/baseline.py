"""The Evaluator's baseline on local runs: the latest blessed model other than the candidate.

TFX's LatestBlessedModelStrategy returns the latest blessed model. On a rerun
with nothing changed the Trainer is served from cache, so the candidate is
that very model: the Evaluator's inputs differ from last time, it runs again
to compare the model with itself, and the Pusher pushes the same model as a
new version. Leaving the candidate out gives the baseline it was evaluated
against the first time, so the Evaluator and the Pusher are served from cache
too. A new candidate gets exactly what TFX's strategy gives.
"""

from __future__ import annotations

from typing import Optional

import ml_metadata as mlmd
from tfx import types
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy

CANDIDATE_KEY = "candidate"


class PreviousBlessedModelStrategy(LatestBlessedModelStrategy):
    """Inputs: `model` and `model_blessing` (all of them, as for TFX's strategy) and
    `candidate` (the Trainer's model of this run), which is passed through."""

    def resolve_artifacts(self, store: mlmd.MetadataStore, input_dict: dict[str, list[types.Artifact]]
                          ) -> Optional[dict[str, list[types.Artifact]]]:
        if CANDIDATE_KEY not in input_dict:
            raise ValueError(f"{type(self).__name__} needs a {CANDIDATE_KEY!r} input channel "
                             f"(the Trainer's model); got {sorted(input_dict)}")
        candidate = input_dict[CANDIDATE_KEY]
        exclude = {a.id for a in candidate}
        rest = {k: [a for a in v if a.id not in exclude] for k, v in input_dict.items() if k != CANDIDATE_KEY}
        result = super().resolve_artifacts(store, rest)
        return None if result is None else {**result, CANDIDATE_KEY: candidate}
