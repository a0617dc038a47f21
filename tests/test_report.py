"""The run report, rendered from real LocalDagRunner runs."""

import base64
import html
import os
import re
import shutil
import subprocess

import pytest
from tfx import v1 as tfx
from tfx.types import artifact as tfx_artifact

from pipeline import cli
from pipeline.runs.report import REPORT_FILE, read_scalars, render, run_dir
from pipeline.runs.summary import ACCURACY, summarize

pytestmark = pytest.mark.e2e

SECTIONS = ("overview", "components", "data", "training", "evaluation", "snapshot")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', page)]


def _section(page: str, anchor: str) -> str:
    match = re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S)
    assert match, f"section {anchor!r} missing"
    return match.group(1)


@pytest.fixture(scope="module")
def report(pipeline_run):
    config, summary, console = pipeline_run
    path = os.path.join(run_dir(config, summary.run_id), REPORT_FILE)
    with open(path) as f:
        return config, summary, console, path, f.read()


def test_every_run_writes_a_self_contained_report(report):
    config, summary, console, path, page = report
    assert path.startswith(os.path.join(config.pipeline.root_uri, "runs") + "/")
    assert f"report:    {path}" in console
    for anchor in SECTIONS:
        _section(page, anchor)
    images = _images(page)
    assert len(images) == 2  # component durations, training curves
    assert all(img.startswith(PNG_MAGIC) and len(img) > 5000 for img in images)
    # Self-contained: nothing is fetched from anywhere.
    assert not re.search(r'(src|href)="(?!data:)', page)


def test_report_shows_what_the_run_recorded(report):
    config, summary, _, _, page = report
    assert summary.run_id in _section(page, "overview")
    components = _section(page, "components")
    for c in summary.components:
        assert f"<td>{c.name}</td><td>{c.state}</td><td>{c.seconds:.1f}</td>" in components
    data = _section(page, "data")
    for name in (*(f.name for f in (*config.features.numeric, *config.features.categorical)), config.features.label):
        assert f"<td>{name}</td>" in data
    # The bundled data misses the measurements in 2 of 344 rows: the table must show it.
    assert re.search(r"<td>bill_length_mm</td><td>float</td><td>(?!0\.0%)[0-9.]+%</td>", data)
    assert "every split matches the schema" in data
    evaluation = _section(page, "evaluation")
    assert f"<td>{ACCURACY}</td><td>{summary.metrics[ACCURACY]:.4f}</td>" in evaluation
    assert f"&ge; {config.evaluator.lower_bound:.4g}" in evaluation
    assert "<b>Blessed</b>" in evaluation and "no model was serving yet" in evaluation
    assert summary.pushed_path in evaluation
    assert summary.snapshot_digest and summary.snapshot_digest in _section(page, "snapshot")


def test_training_curves_come_from_the_trainer_summaries(report):
    config, summary, _, _, page = report
    model_run = next(a for a in summary.outputs["Trainer"] if a.type_name == "ModelRun")
    scalars = read_scalars(model_run.uri)
    for name in ("loss", "accuracy", "eval_loss", "eval_accuracy", "learning_rate", "examples_per_second"):
        assert scalars[name], name
    assert scalars["loss"][-1][0] == config.trainer.train_steps
    eval_steps = [step for step, _ in scalars["eval_accuracy"]]
    assert eval_steps == list(range(config.trainer.eval_every_steps, config.trainer.train_steps + 1,
                                    config.trainer.eval_every_steps))
    training = _section(page, "training")
    assert f"<td>eval_accuracy</td><td>{scalars['eval_accuracy'][-1][1]:.4g}</td>" in training


def test_cli_regenerates_the_latest_or_a_named_run(report, capsys):
    config, summary, _, path, page = report
    os.remove(path)
    root = f"pipeline.root={config.pipeline.root}"
    assert cli.main(["report", summary.run_id, "--set", root]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip() == path
    with open(path) as f:
        assert _section(f.read(), "evaluation") == _section(page, "evaluation")
    # Other tests may have run the pipeline again on the same store since.
    latest = summarize(config.pipeline.metadata_path, config.pipeline.name).run_id
    assert cli.main(["report", "--set", root]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip() == os.path.join(run_dir(config, latest), REPORT_FILE)
    assert cli.main(["report", "no-such-run", "--set", root]) == cli.EXIT_FAILED
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_a_rejected_candidate_shows_baseline_numbers_and_why(rejected_run, safety_run):
    """A run against an earlier blessed model whose candidate can't clear the bar (shared with the gate tests)."""
    config, summary = rejected_run.config, rejected_run.summary
    assert summary.blessed is False and summary.pushed_path is None
    with open(os.path.join(run_dir(config, summary.run_id), REPORT_FILE)) as f:
        evaluation = _section(f.read(), "evaluation")
    assert (f"<td>{ACCURACY}</td><td>{summary.metrics[ACCURACY]:.4f}</td>"
            f"<td>{safety_run.summary.metrics[ACCURACY]:.4f}</td>") in evaluation
    assert "<b>Not blessed</b>" in evaluation and "nothing pushed" in evaluation
    assert summary.validation_failures
    assert all(html.escape(f) in evaluation for f in summary.validation_failures)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_report_renders_in_a_real_browser(report, tmp_path):
    from PIL import Image

    *_, path, _ = report
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2400",
                    f"--screenshot={shot}", f"file://{path}"], check=True, capture_output=True, timeout=120)
    image = Image.open(shot).convert("L")
    assert image.size == (1200, 2400)
    # Charts and tables, not a blank or error page: many distinct grey levels and plenty of ink.
    histogram = image.histogram()
    assert sum(1 for count in histogram if count) > 64
    assert sum(histogram[:128]) > 0.01 * image.size[0] * image.size[1]



class _TestDatasetSnapshot(tfx_artifact.Artifact):
    TYPE_NAME = "test.DatasetSnapshot"


@tfx.dsl.components.component
def SnapshotStep(snapshot: tfx.dsl.components.OutputArtifact[_TestDatasetSnapshot]):  # noqa: N802
    snapshot.set_string_custom_property("digest", "sha256:abc123")


@tfx.dsl.components.component
def ReadStep(snapshot: tfx.dsl.components.InputArtifact[_TestDatasetSnapshot]):  # noqa: N802
    del snapshot


def test_snapshot_section_shows_digest_and_lineage(tmp_path):
    """A real two-component TFX pipeline whose first step emits a snapshot-typed artifact."""
    snap = SnapshotStep()
    read = ReadStep(snapshot=snap.outputs["snapshot"])
    metadata_path = str(tmp_path / "mlmd.sqlite")
    tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
        pipeline_name="snap-test", pipeline_root=str(tmp_path / "root"), components=[snap, read],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path)))

    section = _section(render(summarize(metadata_path, "snap-test"), "snap-test"), "snapshot")
    assert "<td>digest</td><td>sha256:abc123</td>" in section
    assert "<td>produced by</td><td>SnapshotStep</td>" in section
    assert re.search(r"<td>test\.DatasetSnapshot</td><td>[^<]+</td><td>ReadStep</td>", section)
