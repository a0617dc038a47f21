"""Gates: bad data stops the run before Transform, a worse model is not pushed, and
the model already serving is never touched (its files' hashes are compared)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from components.data.data_gate import check
from components.errors import DataAnomaliesError
from pipeline.cli import main
from pipeline.config import load_config
from pipeline.dag.evaluation import bounds
from pipeline.errors import EXIT_FAILED, PipelineFailed
from pipeline.local.runner import run_local
from pipeline.runs.mlmd import anomalies_of, open_store
from pipeline.runs.summary import ACCURACY, summarize
from tests.bad_inputs import write_case
from tests.conftest import CONFIG, tree_hashes

pytestmark = pytest.mark.e2e

# case -> (the component that stops the run, what its message must say)
STOPS = {
    "missing_column": ("DataGate", ["feature bill_depth_mm: SCHEMA_MISSING_COLUMN"]),
    "numeric_column_with_strings": ("DataGate", ["feature body_mass_g: UNEXPECTED_DATA_TYPE",
                                                 'not ints were found, such as "missing"',
                                                 "add it to data.missing_values"]),
    "feature_entirely_null": ("DataGate", ["feature flipper_length_mm: FEATURE_TYPE_NOT_PRESENT"]),
    "empty_file": ("Snapshot", ["penguins.csv: empty file, no header row"]),
    "header_only": ("DataGate", ["split train, feature (dataset): NO_DATA_IN_SPAN",
                                 "split eval, feature (dataset): NO_DATA_IN_SPAN"]),
    "truncated_last_line": ("Snapshot", ["penguins.csv line 345: 6 fields, the header has 8"]),
    "different_delimiter": ("DataGate", ["feature species: SCHEMA_MISSING_COLUMN", "SCHEMA_NEW_COLUMN"]),
    "absurd_values": ("DataGate", ["feature body_mass_g: INT_TYPE_BIG_INT: Unexpectedly large value: 1000000000"]),
}
NEVER_AFTER_A_STOP = {"Transform", "Trainer", "Evaluator", "Pusher"}


def _serving(run) -> Path:
    return Path(run.config.pipeline.serving_dir)


@pytest.mark.parametrize("case", sorted(STOPS))
def test_bad_input_stops_before_transform(case, safety_run, tmp_path):
    component, expected = STOPS[case]
    before = tree_hashes(_serving(safety_run))
    config = load_config(CONFIG, safety_run.overrides(f"data.input_dir={write_case(case, tmp_path / case)}"))
    out = io.StringIO()
    with pytest.raises(PipelineFailed) as failed:
        run_local(config, out)
    message = str(failed.value)
    assert message.startswith(f"{component} failed"), message
    for text in expected:
        assert text in message, message
    summary = summarize(config.pipeline.metadata_path, config.pipeline.name)
    assert not NEVER_AFTER_A_STOP & {c.name for c in summary.components}, summary.components
    assert summary.component(component).state == "failed"
    if component == "DataGate":
        assert summary.gate_anomalies and "data gate: STOPPED the run" in out.getvalue()
    assert tree_hashes(_serving(safety_run)) == before, "the serving model changed"
    if case == "absurd_values":
        # The same real anomalies pass when their kind is tolerated, and only then.
        [validator] = [c for c in summary.components if c.name == "ExampleValidator"]
        store = open_store(config.pipeline.metadata_path)
        [anomalies] = [a for e in store.get_events_by_execution_ids([validator.execution_id]) if e.type == e.OUTPUT
                       for a in store.get_artifacts_by_id([e.artifact_id])]
        found = anomalies_of(anomalies)
        check(found, frozenset({"INT_TYPE_BIG_INT"}))
        with pytest.raises(DataAnomaliesError):
            check(found, frozenset({"SCHEMA_NEW_COLUMN"}))


def test_cli_exits_nonzero_listing_the_anomalies(safety_run, tmp_path, capsys):
    """Unseen category in `island`, through the `python -m pipeline run` entry point."""
    before = tree_hashes(_serving(safety_run))
    source = write_case("unseen_island", tmp_path / "unseen_island")
    args = [a for o in safety_run.overrides(f"data.input_dir={source}") for a in ("--set", o)]
    assert main(["run", "--config", CONFIG, *args]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert "error: DataGate failed: DataAnomaliesError" in err
    assert "feature island: ENUM_TYPE_UNEXPECTED_STRING_VALUES" in err and "Atlantis" in err
    assert "data gate: STOPPED the run" in out and "pushed: nothing" in out
    assert tree_hashes(_serving(safety_run)) == before


def test_weak_model_is_not_pushed(rejected_run):
    config, summary, text = rejected_run.config, rejected_run.summary, rejected_run.output
    assert config.trainer.train_steps == 1
    assert summary.blessed is False and summary.pushed_path is None, text
    acc, base = summary.metrics[ACCURACY], summary.baseline_metrics[ACCURACY]
    assert acc < bounds(config)[0] and acc < base
    # The summary says why, with the numbers: the test split's value, the trivial model's, the bound, the serving
    # model's; each failed threshold in words.
    assert (f"test accuracy: {acc:.4f} (trivial model {summary.trivial_metric:.4f}; serving model {base:.4f}; "
            "bar: lower bound 0.9, no worse than the serving model)") in text, text
    assert "blessed: NO" in text, text
    assert f"why: test accuracy {acc:.4f} is below the lower bound 0.9 (evaluator.lower_bound; " in text, text
    assert f"why: test accuracy {acc:.4f} is worse than the serving model's {base:.4f}" in text, text
    assert rejected_run.serving_after == rejected_run.serving_before
