"""components/serving/warmup.py and components/serving/serving_gate.py: the warm-up file holds PredictionLogs from
real eval rows
that replay through the SavedModel, and a candidate TF Serving could not serve is refused by a TF-only process."""

from __future__ import annotations

import shutil

import pytest
import tensorflow as tf

from components.errors import ServingGateError
from components.serving import serving_gate, warmup
from tests import serving_models
from tests.conftest import tree_hashes
from tests.serving_models import LABEL

SETTINGS = serving_gate.GateSettings(model_name="penguin-tpu", warmup_requests=5, drop_features=(LABEL,))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    return serving_models.save_model(root / "model"), serving_models.eval_split(root / "examples")


def _candidate(tmp_path, saved, edit=None):
    model, examples = saved
    copy = shutil.copytree(model, tmp_path / "candidate")
    if edit is not None:
        edit(copy)
    serving_gate.add_warmup(str(copy), str(examples), SETTINGS)
    return copy


def test_warmup_file_reads_back_with_serving_protos_and_replays_through_the_saved_model(tmp_path, saved):
    candidate = _candidate(tmp_path, saved)
    logs = warmup.read(str(candidate))
    assert len(logs) == SETTINGS.warmup_requests
    serve = tf.saved_model.load(str(candidate)).signatures["serving_default"]
    lengths = []
    for log in logs:
        request = log.predict_log.request
        assert (request.model_spec.name, request.model_spec.signature_name) == ("penguin-tpu", "serving_default")
        [row] = tf.make_ndarray(request.inputs["examples"])
        example = tf.train.Example.FromString(row)
        assert LABEL not in example.features.feature  # clients don't send the label
        lengths.append(example.features.feature["bill_length_mm"].float_list.value[0])
        answer = serve(examples=tf.constant([row]))
        assert answer["scores"].shape == (1, 3) and answer["classes"].numpy()[0] in (b"Biscoe", b"Dream")
    # The eval split's first rows, in order: real rows, the same ones every time.
    assert lengths == [30.0, 31.0, 32.0, 33.0, 34.0]


def test_a_model_needing_an_op_core_tensorflow_lacks_is_refused_naming_it(tmp_path, saved):
    verdict = serving_gate.check(str(_candidate(tmp_path, saved, serving_models.with_op)), SETTINGS)
    assert not verdict.ok
    assert "not registered in core TensorFlow" in verdict.reason and "CaseFoldUTF8" in verdict.reason
    assert "node normalize" in verdict.reason


def test_outputs_unlike_the_declared_signature_are_refused(tmp_path, saved):
    verdict = serving_gate.check(str(_candidate(tmp_path, saved, serving_models.with_declared_dtype)), SETTINGS)
    assert not verdict.ok and "output 'scores' is float32, but serving_default declares int64" in verdict.reason


def test_answers_slower_than_the_bound_are_refused(tmp_path, saved):
    strict = serving_gate.GateSettings(model_name="penguin-tpu", warmup_requests=2, max_latency_ms=1e-6)
    verdict = serving_gate.check(str(_candidate(tmp_path, saved)), strict)
    assert not verdict.ok and "over the bound of 1e-06 ms" in verdict.reason


def test_no_eval_rows_is_an_error_naming_the_split(tmp_path, saved):
    model, _ = saved
    with pytest.raises(ServingGateError, match="no eval split under"):
        serving_gate.add_warmup(str(model), str(tmp_path / "nothing"), SETTINGS)


def test_the_pusher_pushes_the_candidate_with_its_warmup_and_refuses_one_that_cannot_serve(tmp_path, saved):
    from components.pusher import GATE, REFUSED
    from components.serving import serving_dir

    model, examples = saved
    base = tmp_path / "serving"
    first = serving_models.push(tmp_path, model, examples, base, "good", SETTINGS)
    assert first.get_int_custom_property("pushed") == 1
    assert f"{SETTINGS.warmup_requests} warm-up requests answered" in first.get_string_custom_property(GATE)
    [version] = serving_dir.versions(str(base))
    assert len(warmup.read(version.path)) == SETTINGS.warmup_requests
    before = tree_hashes(base)

    bad = serving_models.with_op(shutil.copytree(model, tmp_path / "bad"))
    second = serving_models.push(tmp_path, bad, examples, base, "bad", SETTINGS)
    assert second.get_int_custom_property("pushed") == 0
    assert "CaseFoldUTF8" in second.get_string_custom_property(REFUSED)
    assert tree_hashes(base) == before  # what serves is untouched, byte for byte


def test_the_dags_pusher_gets_the_eval_rows_and_the_serving_settings(tmp_path):
    from components.pusher import EXAMPLES_KEY, SERVING_KEY
    from pipeline.dag.pipeline import create_pipeline
    from tests.conftest import local_config

    config = local_config(tmp_path, "serving.warmup_requests=3")
    pipeline = create_pipeline(config)
    pusher = next(c for c in pipeline.components if c.id == "Pusher")
    assert pusher.inputs[EXAMPLES_KEY].producer_component_id == "CsvExampleGen"
    settings = serving_gate.GateSettings.from_json(pusher.exec_properties[SERVING_KEY])
    assert settings.warmup_requests == 3 and settings.model_name == config.pipeline.name
    assert settings.drop_features == ("species", "year")  # the label and features.ignore of configs/local.yaml


def test_a_refusal_reads_the_same_in_the_summary_and_history():
    from pipeline.runs.history import Row
    from pipeline.runs.summary import RunSummary, exit_code, push_outcome

    summary = RunSummary("r", [], {}, {}, True, [], None, None, refused="ops not registered in core TensorFlow: X")
    assert push_outcome(summary) == ("nothing, refused by the serving gate: ops not registered in core TensorFlow: X "
                                     "(the model serving now, if any, is unchanged)")
    assert exit_code(summary) == 3
    canary = RunSummary("r", [], {}, {}, True, [], None, None, unchanged_version="7", unchanged_is_canary=True)
    assert push_outcome(canary) == ("nothing new: the candidate is the canary out (version 7), "
                                    "so it was not pushed again")
    row = Row("r", "(flat)", 1, "ok", 1.0, True, None, None, None, refused=summary.refused)
    assert row.outcome == "refused by serving gate"


def test_the_same_rows_give_the_same_warmup_bytes_in_any_process(tmp_path, saved):
    """The Pusher's "identical to the version serving" check compares warm-up files: protobuf maps serialize in an
    order that varies with the process's hash seed unless serialized deterministically."""
    import hashlib
    import os
    import subprocess
    import sys

    model, examples = saved
    script = ("import sys; from components.serving import serving_gate as g; "
              "g.add_warmup(sys.argv[1], sys.argv[2], g.GateSettings.from_json(sys.argv[3]))")
    digests = set()
    for seed in ("1", "3"):  # two seeds that order these rows' features differently (without it, this fails)
        copy = shutil.copytree(model, tmp_path / f"seed-{seed}")
        subprocess.run([sys.executable, "-c", script, str(copy), str(examples), SETTINGS.to_json()], check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed, "TF_CPP_MIN_LOG_LEVEL": "3"})
        digests.add(hashlib.sha256(open(warmup.warmup_path(str(copy)), "rb").read()).hexdigest())
    assert len(digests) == 1
