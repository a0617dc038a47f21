"""The one condition in the DAG: everything after the Snapshot runs only if it found something new to train on.
Why and sources: docs/internals.md."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import ContextManager

# From its defining module, not tfx.v1 (which imports the Vertex extensions; pipeline/dag/pipeline.py).
from tfx.dsl.experimental.conditionals.conditional import Cond

from components.data.snapshot.component import SNAPSHOT_KEY, Snapshot
from components.data.snapshot.newness import NEW_SPAN
from pipeline.config import Config
from pipeline.dag.splits import split_buckets


def checks_new_span(config: Config) -> bool:
    """Whether runs skip everything after the Snapshot when it finds nothing new: no new span (span layout) or
    an unchanged source (flat), with the training config unchanged (training_config_digest). A pinned snapshot
    is a deliberate rerun: it always trains."""
    return bool(config.data.skip_when_no_new_span and not config.snapshot.digest)


def training_config_digest(config: Config, code_version: str) -> str:
    """The digest of what decides the model besides the data and the schema file: the features and trainer
    sections, the split, the Trainer's machines on Vertex, the tuning section, and the code (docs/retraining.md). A
    change to any of them makes the run new; evaluator, gates, Beam, caching and where things live do not."""
    decides = {"features": config.features.model_dump() if config.features else None,
               "trainer": config.trainer.model_dump(),
               "split": list(split_buckets(config).values()),
               "worker_pool": config.vertex.worker_pool.model_dump() if config.vertex else None,
               "code": code_version,
               # Only when set, so a config without one keeps its digest.
               **({"tuning": config.tuning.model_dump()} if config.tuning else {})}
    return hashlib.sha256(json.dumps(decides, sort_keys=True, default=str).encode()).hexdigest()


def only_with_new_span(config: Config, snapshot: Snapshot) -> ContextManager:
    """`with` this around the components after the Snapshot."""
    if not checks_new_span(config):
        return contextlib.nullcontext()
    future = snapshot.outputs[SNAPSHOT_KEY].future()
    # TFX 1.16's future() presets the key "_Snapshot.snapshot" (tfx/types/channel.py, OutputChannel.future).
    # The Vertex compiler keeps a preset key for the first node it compiles
    # (channel_utils.encode_placeholder_with_channels sets a key only where none is, then clears it) but adds
    # that implicit input only to a node that does not read the channel already (step_builder.py,
    # implicit_keys_map): ExampleGen, which reads the snapshot as "snapshot", got a condition on an input it
    # lacks. Without the preset key each node's condition names the key it reads the snapshot under; the local
    # compiler (node_inputs_compiler.py, _compile_conditionals) finds the key itself either way.
    future.set_key(None)
    return Cond(future[0].custom_property(NEW_SPAN) == 1)
