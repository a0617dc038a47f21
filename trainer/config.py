"""The trainer's settings, and the path checks shared with the pipeline config. Why: docs/internals.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trainer import pod

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


def validate_uri(value: str, field: str) -> str:
    """Accept a local path or gs://bucket/prefix; reject traversal and odd characters."""
    if not value or "\x00" in value or "\n" in value:
        raise ValueError(f"{field}: empty or contains control characters")
    if value.startswith("gs://"):
        bucket, _, prefix = value[len("gs://"):].partition("/")
        if not _BUCKET_RE.match(bucket):
            raise ValueError(f"{field}: {bucket!r} is not a valid GCS bucket name")
        parts = prefix.split("/")
    elif "://" in value:
        raise ValueError(f"{field}: only local paths and gs:// URIs are supported, got {value!r}")
    else:
        parts = Path(value).parts
    if ".." in parts:
        raise ValueError(f"{field}: '..' is not allowed in paths ({value!r})")
    return value


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class TrainerConfig(Section):
    strategy: Literal["auto", "tpu", "mirrored", "multi_worker", "default"] = "auto"
    # 'local': this TPU VM's chips (one host). A pod (python -m trainer as its client on worker 0,
    # docs/trainer.md): the TPU's name, grpc://host:8470,... of its hosts, or 'hosts' (from TPU_WORKER_HOSTNAMES).
    tpu: str = pod.LOCAL
    # Refuse to start unless TensorFlow sees this accelerator, rather than
    # train on CPU (on Vertex the worker-pool preset sets it).
    require_accelerator: Optional[Literal["tpu", "gpu"]] = None
    precision: Literal["auto", "float32", "mixed_bfloat16", "mixed_float16"] = "auto"
    # The budget (trainer/budget.py, docs/trainer.md#the-training-budget). Unset, the default: passes over the
    # training split, evaluated on a fixed cadence, stopped once eval loss has not improved for a patience,
    # at most max_passes; every key left empty below is derived from the table's size. Set: that many optimizer
    # steps, the budget as it always was (the keys left empty take their fixed step-budget defaults).
    train_steps: Optional[int] = Field(None, ge=1)
    max_passes: Optional[float] = Field(None, gt=0, le=100_000)  # the pass budget's bound; empty: from the table
    max_train_seconds: Optional[float] = Field(None, gt=0)  # a wall-clock cap on the loop, either budget; empty: none
    global_batch_size: Optional[int] = Field(None, ge=1)  # empty: grows with the table (32 with train_steps)
    steps_per_execution: int = Field(20, ge=1)
    eval_every_steps: Optional[int] = Field(None, ge=1)  # empty: a pass or more (100 with train_steps)
    eval_batches: int = Field(0, ge=0)  # 0: the whole eval split
    # Evaluations without a lower eval loss before stopping; 0: off. Empty: from the budget (off with train_steps).
    early_stopping_patience: Optional[int] = Field(None, ge=0)
    # Export the weights of the evaluation with the best main metric (the Evaluator's gate, trainer/tasks.py)
    # on the eval split, or those of the last step. Without an eval split `best` exports the last step.
    export: Literal["best", "last"] = "best"
    # After training, measure the input pipeline alone against training (trainer/input_check.py):
    # a few percent of the run, for the input-bound verdict in the log, the summary and the report.
    check_input: bool = True
    learning_rate: Optional[float] = Field(None, gt=0, le=10)  # Adam's peak rate; empty: from the budget
    # Linear scaling with replicas keeps the per-example update size when the
    # global batch grows with the device count.
    scale_lr_with_replicas: bool = True
    warmup_steps: Optional[int] = Field(None, ge=0)  # linear warm-up; empty: from the budget (0 with train_steps)
    # After the warm-up: `plateau` halves the rate each time eval loss has not improved for a while (the
    # budget's), `none` keeps it. Empty: plateau for the pass budget, none with train_steps.
    decay: Optional[Literal["plateau", "none"]] = None
    gradient_accumulation_steps: int = Field(1, ge=1)
    # MLP layer widths; empty: from the number and kinds of the model's inputs (trainer/sizing.py).
    hidden_units: Optional[list[int]] = None
    # L2 on the hidden layers' kernels; empty: from the model's weights per training row (trainer/sizing.py),
    # 0.01 with train_steps (docs/trainer.md#overfitting).
    l2: Optional[float] = Field(None, ge=0)
    # Dropout after each hidden layer while training; 0: none (the model has no dropout layers).
    dropout: float = Field(0.0, ge=0, lt=1)
    jit_compile: bool = False
    seed: int = 42
    deterministic: bool = True
    # Empty: checkpoints live in the Trainer's own model_run dir.
    checkpoint_dir: Optional[str] = None
    checkpoint_every_steps: Optional[int] = Field(None, ge=1)  # empty: at each evaluation (100 with train_steps)
    checkpoints_to_keep: int = Field(3, ge=1)
    # Start from the serving model's weights when vocabularies and shapes
    # match (trainer/warm_start.py); the pipeline passes that model to the Trainer.
    warm_start: bool = False
    # [start, stop) step window to capture with tf.profiler; empty: off.
    profile_steps: list[int] = []

    @field_validator("tpu")
    @classmethod
    def _tpu(cls, v: str) -> str:
        return pod.check_tpu(v)

    @field_validator("checkpoint_dir")
    @classmethod
    def _ckpt(cls, v: Optional[str]) -> Optional[str]:
        return None if v in (None, "") else validate_uri(v, "trainer.checkpoint_dir")

    @field_validator("hidden_units")
    @classmethod
    def _units(cls, v: Optional[list[int]]) -> Optional[list[int]]:
        if v is not None and (not v or any(u < 1 for u in v)):
            raise ValueError("must be a non-empty list of positive layer widths")
        return v

    @model_validator(mode="after")
    def _one_budget(self) -> "TrainerConfig":
        if self.train_steps is not None and self.max_passes is not None:
            raise ValueError(f"train_steps ({self.train_steps}) and max_passes ({self.max_passes:g}) are two budgets: "
                             "set train_steps for a fixed number of steps, or max_passes (or neither) for passes "
                             "over the data until eval loss stops improving")
        return self

    @field_validator("profile_steps")
    @classmethod
    def _profile(cls, v: list[int]) -> list[int]:
        if v and (len(v) != 2 or not 0 <= v[0] < v[1]):
            raise ValueError("must be empty or [start, stop) with 0 <= start < stop")
        return v
