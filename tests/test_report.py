"""The run report, rendered from real LocalDagRunner runs."""

import base64
import html
import io
import os
import re
import shutil
import statistics
import subprocess

import pytest
from tfx import v1 as tfx
from tfx.types import artifact as tfx_artifact

from pipeline import cli
from pipeline.config import load_config
from pipeline.errors import EXIT_FAILED, EXIT_OK, PipelineFailed
from pipeline.local.runner import run_local
from pipeline.runs.history import Row, format_history, history
from pipeline.runs.history_page import history_figure
from pipeline.runs.report import REPORT_FILE, read_scalars, render, run_dir
from pipeline.runs.summary import ACCURACY, format_summary, main_result, summarize, why_not_blessed
from tests.bad_inputs import write_case
from tests.conftest import CONFIG

pytestmark = pytest.mark.e2e

SECTIONS = ("overview", "quality", "evaluation", "training", "components", "data", "snapshot")
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
    # In this order: the quality first, the data's long tables last.
    assert re.findall(r'<section id="([a-z]+)">', page) == list(SECTIONS)
    images = _images(page)
    # Accuracy per slice (island, sex), the confusion matrix, training curves, component durations.
    assert re.findall(r'<img alt="([^"]+)"', page) == ["accuracy per slice", "confusion matrix", "training curves",
                                                       "time per component"]
    assert all(img.startswith(PNG_MAGIC) and len(img) > 5000 for img in images)
    # Self-contained: nothing is fetched from anywhere.
    assert not re.search(r'(src|href)="(?!data:)', page)


def test_report_shows_what_the_run_recorded(report):
    config, summary, _, _, page = report
    assert summary.run_id in _section(page, "overview")
    components = _section(page, "components")
    for c in summary.components:
        assert f"<td>{c.name}</td><td>{c.state}</td><td>{c.seconds:.1f}</td>" in components
    assert f"<td>sum of the components</td><td></td><td>{sum(c.seconds for c in summary.components):.1f}</td>" \
        in components
    data = _section(page, "data")
    for name in (*(f.name for f in (*config.features.numeric, *config.features.categorical)), config.features.label):
        assert f"<td>{name}</td>" in data
    # The bundled data misses the measurements in 2 of 344 rows: the table must show it.
    assert re.search(r"<td>bill_length_mm</td><td>float</td><td>(?!0\.0%)[0-9.]+%</td>", data)
    assert "every split matches the schema" in data
    # The statistics and the columns are folded.
    assert data.count("<details>") == 4  # the train, eval and test splits' statistics; the columns
    # How the run read each column, as Transform recorded it.
    columns = data.split("Columns as the model reads them", 1)[1]
    assert "<td>species</td><td>label</td><td>multiclass</td><td>from the config</td>" in columns
    assert "<td>island</td><td>categorical</td>" in columns and "<td>year</td><td>ignored</td>" in columns
    evaluation = _section(page, "evaluation")
    # On the test split, beside the trivial model, against the configured bound (stricter than the trivial model's).
    assert f"On the <b>test</b> split ({summary.metrics['example_count']:.0f} rows)" in evaluation
    bound = config.evaluator.lower_bound
    assert (f"<td>{ACCURACY}</td><td>{summary.metrics[ACCURACY]:.4f}</td><td>&ndash;</td>"
            f"<td>{summary.trivial_metric:.4f}</td><td>lower bound {bound:.6g}</td>") in evaluation
    assert f"<td>example_count</td><td>{summary.metrics['example_count']:.0f}</td>" in evaluation  # a count
    assert "<b>Blessed</b>" in evaluation and "no model was serving yet" in evaluation
    assert summary.pushed_path in evaluation
    snapshot = _section(page, "snapshot")
    assert summary.snapshot_digest and summary.snapshot_digest in snapshot
    # No empty fields (a flat source has no spans) and no internal rows (the run condition, its key).
    assert "<td>spans</td>" not in snapshot and "<td></td></tr>" not in snapshot
    assert "<td>new_span</td>" not in snapshot and "training_key" not in snapshot and "Integer" not in snapshot


def test_training_curves_come_from_the_trainer_summaries(report):
    config, summary, console, _, page = report
    model_run = next(a for a in summary.outputs["Trainer"] if a.type_name == "ModelRun")
    scalars = read_scalars(model_run.uri)
    for name in ("loss", "accuracy", "eval_loss", "eval_accuracy", "learning_rate", "examples_per_second"):
        assert scalars[name], name
    budget = summary.trainer.budget  # configs/local.yaml leaves the budget to the data: passes, early stopping
    assert budget.by_passes and scalars["loss"][-1][0] == budget.steps
    eval_steps = [step for step, _ in scalars["eval_accuracy"]]
    assert eval_steps == list(range(budget.eval_every_steps, budget.steps + 1, budget.eval_every_steps))
    training = _section(page, "training")
    assert f"<td>eval_accuracy</td><td>{scalars['eval_accuracy'][-1][1]:.4g}</td>" in training
    # The exported step is the best evaluation (trainer.export=best) and the summary says so, as does the report.
    exported = summary.exported
    best_step, best = max(scalars["eval_accuracy"], key=lambda sv: (sv[1], -sv[0]))
    assert (exported.policy, exported.step, exported.metric) == ("best", best_step, "accuracy")
    assert exported.value == pytest.approx(best)
    assert f"trained: exported {exported.describe()}" in console
    assert f"<b>Exported</b> {html.escape(exported.describe())}" in training
    # ... and whether training was input-bound, measured on this run's data.
    check = summary.trainer.input
    assert check.train_examples_per_second > 0 and check.ratio == pytest.approx(
        check.input_examples_per_second / check.train_examples_per_second)
    assert f"input: {check.describe()}" in console
    assert f"<b>Input</b>: {html.escape(check.describe())}" in training
    # ... and how the curve reads, from the same evaluations: its end is the median of the last ones after the
    # lowest eval loss (trainer/overfit.py).
    fit = summary.trainer.overfit
    assert fit.verdict in ("overfitting", "noisy", "still improving", "not overfitting")
    assert fit.last_step == summary.trainer.budget.steps
    losses = [v for _, v in scalars["eval_loss"]]
    assert fit.best_eval_loss == pytest.approx(min(losses), rel=1e-5)
    assert fit.last_eval_loss == pytest.approx(statistics.median(losses[-fit.end_evals:]), rel=1e-5)
    assert f"fit: {fit.describe()}" in console and f"<b>Fit</b>: {html.escape(fit.describe())}" in training
    # ... and how much it trained and why it stopped (configs/local.yaml: the pass budget; penguins stop early, long
    # before their 2,000 steps' worth of passes).
    budget = summary.trainer.budget
    assert (budget.by_passes, budget.stop) == (True, "early") and budget.steps < budget.max_steps
    # Early stopping's reason matches the curve: the lowest eval loss is `patience` evaluations before the end.
    assert fit.best_step == budget.steps - budget.patience * budget.eval_every_steps
    assert f"budget: {budget.describe()}" in console and f"<b>Budget</b>: {html.escape(budget.describe())}" in training
    assert f"model: {summary.trainer.model}" in console and "hidden layers" in summary.trainer.model


def test_cli_regenerates_the_latest_or_a_named_run(report, capsys):
    config, summary, _, path, page = report
    os.remove(path)
    root = f"pipeline.root={config.pipeline.root}"
    assert cli.main(["report", summary.run_id, "--set", root]) == EXIT_OK
    assert capsys.readouterr().out.strip() == path
    with open(path) as f:
        assert _section(f.read(), "evaluation") == _section(page, "evaluation")
    # Other tests may have run the pipeline again on the same store since.
    latest = summarize(config.pipeline.metadata_path, config.pipeline.name).run_id
    assert cli.main(["report", "--set", root]) == EXIT_OK
    assert capsys.readouterr().out.strip() == os.path.join(run_dir(config, latest), REPORT_FILE)
    # The id as the run's directory is named (no ':') works too; a miss names the newest ids.
    assert cli.main(["report", summary.run_id.replace(":", ""), "--set", root]) == EXIT_OK
    assert capsys.readouterr().out.strip() == path
    assert cli.main(["report", "no-such-run", "--set", root]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "no run 'no-such-run'" in err and f"the newest runs of {config.pipeline.name!r}: {latest}" in err


def test_a_rejected_candidate_shows_baseline_numbers_and_why(rejected_run, safety_run):
    """A run against an earlier blessed model whose candidate can't clear the bar (shared with the gate tests)."""
    config, summary = rejected_run.config, rejected_run.summary
    assert summary.blessed is False and summary.pushed_path is None
    with open(os.path.join(run_dir(config, summary.run_id), REPORT_FILE)) as f:
        evaluation = _section(f.read(), "evaluation")
    assert (f"<td>{ACCURACY}</td><td>{summary.metrics[ACCURACY]:.4f}</td>"
            f"<td>{safety_run.summary.metrics[ACCURACY]:.4f}</td>") in evaluation
    assert "<b>Not blessed</b>" in evaluation and "Pushed by this run: nothing, not blessed" in evaluation
    reasons = why_not_blessed(summary, main_result(summary))
    assert summary.validation_failures and reasons
    assert reasons[0].startswith(f"test accuracy {summary.metrics[ACCURACY]:.4f} is ")
    assert all(f"<li>{html.escape(f)}</li>" in evaluation for f in reasons)


def _said(page: str, key: str) -> str:
    """The overview's value for `key`, as plain text."""
    match = re.search(rf"<td>{key}</td><td>(.*?)</td>", _section(page, "overview"), re.S)
    assert match, f"overview has no {key!r} row"
    return html.unescape(match.group(1))


def _report_agrees_with_summary(config, summary) -> str:
    """The report says what the summary says about the push, and claims no push the run did not make."""
    with open(os.path.join(run_dir(config, summary.run_id), REPORT_FILE)) as f:
        page = f.read()
    [summary_line] = [line for line in format_summary(summary, config).splitlines() if line.startswith("pushed: ")]
    outcome = summary_line[len("pushed: "):]
    assert _said(page, "pushed") == outcome
    if summary.blessed is not None:  # the Evaluator ran: its section says it again
        assert f"Pushed by this run: {outcome}" in html.unescape(_section(page, "evaluation"))
    return page


def test_a_run_that_pushed_nothing_new_does_not_claim_an_earlier_push(pipeline_run):
    """The same config again: the Snapshot finds nothing new and nothing after it runs."""
    config, first, _ = pipeline_run
    again = run_local(config, stream=io.StringIO())
    assert again.component("Pusher") is None and again.run_id != first.run_id
    assert again.pushed_path is None and again.pushed_version is None
    assert again.nothing_new
    page = _report_agrees_with_summary(config, again)
    assert _said(page, "pushed").startswith("nothing new")
    # The first run's destination appears nowhere as this run's push.
    assert first.pushed_path not in page


def test_a_blocked_run_reports_what_the_summary_says(safety_run, tmp_path):
    config = load_config(CONFIG, safety_run.overrides(
        f"data.input_dir={write_case('missing_column', tmp_path / 'missing_column')}"))
    with pytest.raises(PipelineFailed):
        run_local(config, io.StringIO())
    blocked = summarize(config.pipeline.metadata_path, config.pipeline.name)
    assert blocked.component("DataGate").state == "failed" and blocked.run_id != safety_run.summary.run_id
    page = _report_agrees_with_summary(config, blocked)
    assert _said(page, "status") == "blocked in DataGate"
    assert _said(page, "pushed").startswith("nothing, blocked by DataGate")
    assert safety_run.summary.pushed_path not in page


def test_history_shows_the_trainers_cpu_hours_of_a_local_run(report):
    config, summary, *_ = report
    [row] = [r for r in history(config) if r.run_id == summary.run_id]
    assert row.drift == "-"  # the root's first run: its drift gate had no serving model to compare with
    assert row.cost.where == "local" and row.cost.usd is None
    assert row.cost.pool_hours == pytest.approx(summary.trainer.cpu_seconds / 3600) and row.cost.pool_hours > 0
    text = format_history(history(config))
    # The runs table's line (the per-slice table below starts with the run id too).
    line = next(line for line in text.splitlines() if line.startswith(summary.run_id[:27]))
    assert f" {row.cost.pool_hours:.4f} " in line
    assert "trainer h: CPU-hours the trainer used (a local run has no worker pool)" in text
    assert f"<td>training cost</td><td>{html.escape(row.cost.describe())}</td>" in _section(report[4], "overview")


def test_counts_print_as_whole_numbers_and_metrics_to_four_decimals():
    from pipeline.runs.summary import metric_text

    assert metric_text("example_count", 10808.0) == "10,808" and metric_text("weighted_example_count", 84.0) == "84"
    assert metric_text("weighted_example_count", 84.5) == "84.5000"  # weighted: not a count of rows
    assert metric_text("accuracy", 1.0) == "1.0000" and metric_text("auc", None) == "-"


def test_history_plot_labels_its_axis_with_the_metric_and_marks_blocked_runs():
    def row(metric, pushed=None, stopped_by=None):
        return Row(run_id="r", spans="-", rows=None, drift="-", metric=metric, blessed=metric is not None,
                   pushed_version=pushed, unchanged_version=None, stopped_by=stopped_by)

    fig = history_figure([row(0.95, pushed="1"), row(None, stopped_by="DataGate"), row(0.94)], "rmse")
    [ax] = fig.axes
    assert ax.get_ylabel() == "test rmse"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "test rmse", "pushed", "nothing new / not blessed", "blocked by a gate (no metric)"]
    fig = history_figure([row(0.95, pushed="1")], "accuracy")
    assert "blocked by a gate (no metric)" not in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


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
