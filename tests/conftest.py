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


@dataclasses.dataclass
class FinishedRun:
    """A finished LocalDagRunner run of the shipped local config plus `settings` (overrides)."""

    root: Path
    config: Config
    summary: object  # pipeline.runs.summary.RunSummary
    output: str  # what the run printed
    settings: tuple[str, ...] = ()

    def overrides(self, *extra: str) -> list[str]:
        """This run's root and settings plus `extra`: for a later run that builds on this one."""
        return [f"pipeline.root={self.root}", *self.settings, *extra]


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    """`finished_run(*settings)`: a real run (caching on) on the bundled data with these
    overrides, made once per session for each distinct `settings` and shared by every test
    that asks for it, so tests that only read a run's outputs don't pay for their own.
    Other tests may run the pipeline again on a shared root: read this run's outputs
    through its summary (run id, execution ids), not through "the latest run"."""
    from pipeline.local.runner import run_local

    runs: dict[tuple[str, ...], FinishedRun] = {}

    def get(*settings: str) -> FinishedRun:
        if settings not in runs:
            root = tmp_path_factory.mktemp("run")
            config = local_config(root, *settings)
            out = io.StringIO()
            summary = run_local(config, stream=out)
            runs[settings] = FinishedRun(root, config, summary, out.getvalue(), settings)
        return runs[settings]

    return get


@pytest.fixture(scope="session")
def pipeline_run(finished_run):
    """The shipped config on the bundled data, as (config, summary, console output);
    shared by the e2e and report tests."""
    run = finished_run()
    return run.config, run.summary, run.output


# The gate and determinism tests train briefly; their own runs reuse these.
SAFETY_TRAIN_STEPS = "trainer.train_steps=200"


def tree_hashes(directory: Path) -> dict[str, str]:
    """sha256 of every file under directory, by relative path."""
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def safety_run(finished_run) -> FinishedRun:
    """A run of its own that pushes the model the gate tests must protect; kept apart
    from pipeline_run so bad-input runs never become another test's 'latest run'.
    Later runs on its root with the same data reuse its cached Transform."""
    run = finished_run(SAFETY_TRAIN_STEPS)
    assert run.summary.pushed_path, run.output
    return run


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
    from pipeline.local.runner import run_local

    serving = Path(safety_run.config.pipeline.serving_dir)
    before = tree_hashes(serving)
    config = load_config(CONFIG, safety_run.overrides(
        "trainer.train_steps=1", "trainer.eval_every_steps=1", "trainer.steps_per_execution=1"))
    out = io.StringIO()
    summary = run_local(config, out)
    return RejectedRun(config, summary, out.getvalue(), before, tree_hashes(serving))


@pytest.fixture(scope="session")
def gcs_emulator():
    """The real fake-gcs-server binary on a free port of 127.0.0.1 (tests/gcs_emulator.py), one per session."""
    from tests.gcs_emulator import running

    with running() as emulator:
        yield emulator


@dataclasses.dataclass
class GcsBucket:
    client: object  # google.cloud.storage.Client talking to the emulator
    name: str

    @property
    def uri(self) -> str:
        return f"gs://{self.name}"


@pytest.fixture
def gcs_bucket(gcs_emulator) -> GcsBucket:
    """A new, empty bucket on the session's emulator, with a real google-cloud-storage client."""
    client = gcs_emulator.client()
    return GcsBucket(client, gcs_emulator.bucket(client))


# `make test` runs two pytest-xdist workers (`--dist loadscope --no-loadscope-reorder`) and
# hands them groups of tests: a module is a group (its module fixtures are made once), and the
# modules whose tests use finished_run (directly or through pipeline_run, safety_run,
# rejected_run) are one group, so each shared run is still made once, on one worker. The longest
# groups are handed out first (xdist gives each worker one, then a second), paired so the two
# workers start with about the same work: the Vertex dry runs and a schedule's dry runs on one,
# the shared runs and the Kubeflow dry runs on the other (durations in docs/performance.md).
SHARED_RUN_MODULES = ("tests/test_baseline.py", "tests/test_bench_quality_scoring.py", "tests/test_determinism.py",
                      "tests/test_evaluator.py", "tests/test_gates.py", "tests/test_lineage.py",
                      "tests/test_pipeline_e2e.py", "tests/test_predict.py", "tests/test_report.py",
                      "tests/test_tuning_run.py")
SHARED_RUNS_GROUP = "shared-runs"
FIRST_GROUPS = ("tests/test_dryrun_e2e.py", SHARED_RUNS_GROUP, "tests/test_dryrun_conditions.py",
                "tests/test_dryrun_kubeflow.py")
# The modules that read the compiled Kubeflow package (tests/kubeflow_support.compiled_package,
# one compile per process) are one group too, so it is compiled once.
KUBEFLOW_PACKAGE_MODULES = ("tests/test_kubeflow_compile.py", "tests/test_kubeflow_jobs.py",
                            "tests/test_kubeflow_launcher.py")
KUBEFLOW_PACKAGE_GROUP = "kubeflow-package"


def group_of(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    if module in KUBEFLOW_PACKAGE_MODULES:
        return KUBEFLOW_PACKAGE_GROUP
    return SHARED_RUNS_GROUP if module in SHARED_RUN_MODULES else module


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "finished_run" in item.fixturenames and group_of(item.nodeid) != SHARED_RUNS_GROUP:
            raise pytest.UsageError(f"{item.nodeid} uses finished_run: add its module to SHARED_RUN_MODULES "
                                    "in tests/conftest.py, or a second worker makes the same runs again")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a plain run keeps pytest's order
        rank = {group: i for i, group in enumerate(FIRST_GROUPS)}
        items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))
