"""What this project's processes need in their environment before TensorFlow loads, set by the command-line entry
points (`python -m pipeline`, `python -m trainer`) so that they work from a plain shell exactly as README shows them
(the Makefile and tests/conftest.py set the same for what they run)."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping, MutableMapping

# TFX, TFT and TFMA 1.16 need Keras 2 (tf_keras); TensorFlow 2.16 reads this once, at its import, to pick Keras 2
# for tf.keras (docs/configuration.md, why TFX 1.16). Forced: with Keras 3 the pipeline cannot run at all.
REQUIRED = {"TF_USE_LEGACY_KERAS": "1"}
# TensorFlow's C++ INFO lines off; a value the person set is kept.
DEFAULTS = {"TF_CPP_MIN_LOG_LEVEL": "1"}
# The directory holding pipeline/, components/ and trainer/: processes this one starts (Beam's worker processes,
# a dry run's tasks) import them by name, so it goes on their PYTHONPATH as the Makefile puts it there.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def prepare(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set what the process and its children need; call before anything imports TensorFlow."""
    environ.update(REQUIRED)
    for name, value in DEFAULTS.items():
        environ.setdefault(name, value)
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if not any(os.path.abspath(p) == REPO_ROOT for p in paths):
        environ["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, *paths])


@contextlib.contextmanager
def overriding(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ with `values` set inside the block, each of those names as it was after it (unset if it was)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
