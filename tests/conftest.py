"""Shared fixtures: real pipeline runs are slow, so tests share them."""

from __future__ import annotations

import os

# Must be set before anything imports TensorFlow (TFX 1.16 needs Keras 2).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dataclasses  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from pipeline.config import Config, load_config  # noqa: E402

CONFIG = "configs/local.yaml"


def local_config(root, *overrides: str) -> Config:
    """The shipped local config, writing everything under `root`."""
    return load_config(CONFIG, [f"pipeline.root={root}", *overrides])


@pytest.fixture(scope="session")
def pipeline_run(tmp_path_factory):
    """One real LocalDagRunner run on the bundled data, shared by the e2e and report tests."""
    from pipeline.local_runner import run_local

    root = tmp_path_factory.mktemp("pipeline")
    config = local_config(root)
    out = io.StringIO()
    summary = run_local(config, stream=out)
    return config, summary, out.getvalue()


# The gate and determinism tests train briefly; their own runs reuse these.
SAFETY_TRAIN_STEPS = "trainer.train_steps=200"


@dataclasses.dataclass
class SafetyRun:
    root: Path
    config: Config
    summary: object
    output: str

    def overrides(self, *extra: str) -> list[str]:
        return [f"pipeline.root={self.root}", SAFETY_TRAIN_STEPS, *extra]


def tree_hashes(directory: Path) -> dict[str, str]:
    """sha256 of every file under directory, by relative path."""
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def safety_run(tmp_path_factory) -> SafetyRun:
    """A run of its own that pushes the model the gate tests must protect; kept apart
    from pipeline_run so bad-input runs never become another test's 'latest run'.
    Caching on: later runs on its root with the same data reuse its Transform."""
    from pipeline.local_runner import run_local

    root = tmp_path_factory.mktemp("safety")
    config = local_config(root, SAFETY_TRAIN_STEPS)
    out = io.StringIO()
    summary = run_local(config, out)
    assert summary.pushed_path, out.getvalue()
    return SafetyRun(root, config, summary, out.getvalue())


@dataclasses.dataclass
class RejectedRun:
    config: Config
    summary: object
    output: str
    serving_before: dict[str, str]  # tree_hashes of safety_run's serving dir before and after this run
    serving_after: dict[str, str]


@pytest.fixture(scope="session")
def rejected_run(safety_run) -> RejectedRun:
    """A candidate the Evaluator must reject (one training step) on safety_run's root,
    against its blessed model; the gate and report tests read the same run."""
    from pipeline.local_runner import run_local

    serving = Path(safety_run.config.pipeline.serving_dir)
    before = tree_hashes(serving)
    config = load_config(CONFIG, safety_run.overrides(
        "trainer.train_steps=1", "trainer.eval_every_steps=1", "trainer.steps_per_execution=1"))
    out = io.StringIO()
    summary = run_local(config, out)
    return RejectedRun(config, summary, out.getvalue(), before, tree_hashes(serving))
