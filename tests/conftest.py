"""Shared fixtures. The safety tests share one real pipeline run (it is slow)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

import pytest

CONFIG = "configs/local.yaml"


@dataclasses.dataclass
class SafetyRun:
    root: Path
    config: object
    summary: object
    output: str

    def overrides(self, *extra: str) -> list[str]:
        return [f"pipeline.root={self.root}", "trainer.train_steps=200", *extra]


def tree_hashes(directory: Path) -> dict[str, str]:
    """sha256 of every file under directory, by relative path."""
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def safety_run(tmp_path_factory) -> SafetyRun:
    """One full run with caching off, on the bundled data: it pushes the model the gate tests protect."""
    from pipeline.config import load_config
    from pipeline.local_runner import run_local

    root = tmp_path_factory.mktemp("safety")
    config = load_config(CONFIG, [f"pipeline.root={root}", "trainer.train_steps=200", "pipeline.enable_cache=false"])
    out = io.StringIO()
    summary = run_local(config, out)
    assert summary.pushed_path, out.getvalue()
    return SafetyRun(root, config, summary, out.getvalue())
