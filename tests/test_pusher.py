"""components/pusher.py's executor: a blessed candidate byte-identical to the serving version is not pushed.

(A plain rerun no longer reaches this check, its Pusher is served from cache: components/baseline.py.
A retrained, bit-identical model, e.g. with caching off, does.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from components import serving_dir
from components.pusher import UNCHANGED_VERSION, PushExecutor


def _model_artifact(tmp_path: Path, name: str, content: str) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / name)
    serving = Path(model.uri) / "Format-Serving"
    (serving / "variables").mkdir(parents=True)
    (serving / "variables" / "variables.index").write_text(content)
    (serving / serving_dir.SAVED_MODEL).write_text(f"graph {content}")
    return model


def _push(tmp_path: Path, model: standard_artifacts.Model, base: Path, blessed: bool = True):
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", int(blessed))
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / f"pushed-{len(os.listdir(tmp_path))}")
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(
        base_directory=str(base)))
    PushExecutor().Do(
        {standard_component_specs.MODEL_KEY: [model], standard_component_specs.MODEL_BLESSING_KEY: [blessing]},
        {standard_component_specs.PUSHED_MODEL_KEY: [pushed]},
        {standard_component_specs.PUSH_DESTINATION_KEY: proto_utils.proto_to_json(destination)})
    return pushed


def test_identical_candidate_is_not_pushed_again_and_names_the_serving_version(tmp_path):
    base = tmp_path / "serving"
    first = _push(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base)
    assert first.get_int_custom_property("pushed") == 1
    [version] = serving_dir.versions(str(base))

    # Another artifact (a retrained model), byte-identical to the one serving.
    again = _model_artifact(tmp_path, "m2", "weights a")
    second = _push(tmp_path, again, base)
    assert second.get_int_custom_property("pushed") == 0
    assert second.get_string_custom_property(UNCHANGED_VERSION) == version.name
    assert os.listdir(base) == [version.name]

    # Different bytes: a new version.
    shutil.rmtree(again.uri)
    third = _push(tmp_path, _model_artifact(tmp_path, "m3", "weights b"), base)
    assert third.get_int_custom_property("pushed") == 1
    assert len(serving_dir.versions(str(base))) == 2


def test_unblessed_candidate_is_not_pushed(tmp_path):
    base = tmp_path / "serving"
    pushed = _push(tmp_path, _model_artifact(tmp_path, "m1", "weights a"), base, blessed=False)
    assert pushed.get_int_custom_property("pushed") == 0
    assert not serving_dir.versions(str(base))
