"""The code version recorded with every model: the image's build arg inside an image, git outside."""

from __future__ import annotations

import subprocess

from pipeline.runs.lineage import CODE_VERSION_ENV, code_version


def test_the_image_code_version_wins_over_git(monkeypatch):
    # Images have no git; infra/docker sets this from the build's commit.
    monkeypatch.setenv(CODE_VERSION_ENV, "0c27c8ad84606812fafc2bd7db3952ab131dbf73")
    assert code_version() == "0c27c8ad84606812fafc2bd7db3952ab131dbf73"


def test_without_the_variable_it_is_the_checkout_commit(monkeypatch):
    monkeypatch.delenv(CODE_VERSION_ENV, raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert code_version().split("-")[0] == head
    monkeypatch.setenv(CODE_VERSION_ENV, "  ")  # an empty build arg is not a version
    assert code_version().split("-")[0] == head
