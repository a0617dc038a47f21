"""Small SavedModels and ExampleGen-shaped eval splits for the serving gate's and the rollout's tests: a model with
serving_default on serialized tf.Examples (as trainer/export.py's), and ways to make one TF Serving can't serve."""

from __future__ import annotations

import shutil
from pathlib import Path

import tensorflow as tf
from tensorflow.core.framework import node_def_pb2, types_pb2
from tensorflow.core.protobuf import saved_model_pb2

FEATURES = ("bill_length_mm", "island")
LABEL = "species"


class _Scorer(tf.Module):
    def __init__(self, weight: float):
        super().__init__()
        self.weight = tf.Variable(weight)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        parsed = tf.io.parse_example(examples, {
            "bill_length_mm": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
            "island": tf.io.FixedLenFeature([1], tf.string, default_value=[""])})
        score = parsed["bill_length_mm"] * self.weight
        return {"scores": tf.concat([score, -score, score * 2], axis=1),
                "classes": tf.reshape(parsed["island"], [-1])}


def save_model(directory: Path, weight: float = 0.5) -> Path:
    """A SavedModel whose serving_default takes serialized tf.Examples; `weight` changes its bytes."""
    module = _Scorer(weight)
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
    return directory


def eval_split(directory: Path, rows: int = 12) -> Path:
    """An ExampleGen-shaped examples artifact: Split-eval/ of gzipped TFRecords of tf.Examples, with the label."""
    split = directory / "Split-eval"
    split.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(split / "data_tfrecord-00000-of-00001.gz"), options="GZIP") as writer:
        for i in range(rows):
            example = tf.train.Example(features=tf.train.Features(feature={
                "bill_length_mm": tf.train.Feature(float_list=tf.train.FloatList(value=[30.0 + i])),
                "island": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"Biscoe" if i % 2 else b"Dream"])),
                LABEL: tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"Adelie"]))}))
            writer.write(example.SerializeToString())
    return directory


def _edit(model_dir: Path, edit) -> Path:
    path = model_dir / "saved_model.pb"
    saved = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    edit(saved)
    path.write_bytes(saved.SerializeToString())
    return model_dir


def with_op(model_dir: Path, op: str = "CaseFoldUTF8") -> Path:
    """The serving function also calls `op` (default: tensorflow_text's UTF-8 case folding, which core TF and
    so TF Serving's model server lack), as a model saved with that library's ops would."""
    def edit(saved):
        for function in saved.meta_graphs[0].graph_def.library.function:
            if any(n.op == "ParseExampleV2" for n in function.node_def):
                arg = function.signature.input_arg[0].name
                function.node_def.append(node_def_pb2.NodeDef(name="normalize", op=op, input=[arg]))
                return
        raise AssertionError("no serving function with ParseExampleV2")
    return _edit(model_dir, edit)


def with_declared_dtype(model_dir: Path, output: str = "scores", dtype=types_pb2.DT_INT64) -> Path:
    """serving_default declares `output` as `dtype`, which it does not answer with."""
    def edit(saved):
        saved.meta_graphs[0].signature_def["serving_default"].outputs[output].dtype = dtype
    return _edit(model_dir, edit)


def push(tmp_path, model_dir, examples, base, name, settings):
    """PushExecutor on a blessed Model artifact holding model_dir, with the examples input and serving settings."""
    from tfx.proto import pusher_pb2
    from tfx.types import standard_artifacts, standard_component_specs
    from tfx.utils import proto_utils

    from components.pusher import EXAMPLES_KEY, SERVING_KEY, PushExecutor

    model = standard_artifacts.Model()
    model.uri = str(tmp_path / f"{name}-model")
    shutil.copytree(model_dir, f"{model.uri}/Format-Serving")
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    examples_artifact = standard_artifacts.Examples()
    examples_artifact.uri = str(examples)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / f"{name}-pushed")
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(base)))
    PushExecutor().Do(
        {standard_component_specs.MODEL_KEY: [model], standard_component_specs.MODEL_BLESSING_KEY: [blessing],
         EXAMPLES_KEY: [examples_artifact]},
        {standard_component_specs.PUSHED_MODEL_KEY: [pushed]},
        {standard_component_specs.PUSH_DESTINATION_KEY: proto_utils.proto_to_json(destination),
         SERVING_KEY: settings.to_json()})
    return pushed
