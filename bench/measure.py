"""Run a command in its own process and watch it: wall time and resident memory
of the whole process tree (Beam's multi-processing workers included)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
import time

import psutil

SAMPLE_SECONDS = 0.5


@dataclasses.dataclass
class Measured:
    command: list[str]
    returncode: int
    started: float  # epoch seconds
    wall_seconds: float
    peak_rss_mb: float
    samples: list[tuple[float, float]]  # (epoch seconds, tree RSS in MB)
    log_file: str

    def peak_between(self, start: float, end: float) -> float | None:
        """Peak tree RSS while [start, end] (epoch seconds) ran; None if no sample fell inside."""
        inside = [mb for t, mb in self.samples if start - SAMPLE_SECONDS <= t <= end + SAMPLE_SECONDS]
        return max(inside) if inside else None


def _tree_rss_mb(proc: psutil.Process) -> float:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total / 2**20


def run_measured(command: list[str], log_file: str, env: dict | None = None, cwd: str | None = None) -> Measured:
    """Run `command` to completion with stdout+stderr in `log_file`, sampling memory meanwhile.
    RSS is summed over processes, so pages shared between them count more than once."""
    samples: list[tuple[float, float]] = []
    with open(log_file, "w") as log:
        started = time.time()
        t0 = time.perf_counter()
        proc = psutil.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                            cwd=cwd)
        done = threading.Event()

        def sample():
            while not done.wait(SAMPLE_SECONDS):
                try:
                    samples.append((time.time(), _tree_rss_mb(proc)))
                except psutil.NoSuchProcess:
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rc = proc.wait()
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
    return Measured(command, rc, started, wall, max((mb for _, mb in samples), default=0.0), samples, log_file)
