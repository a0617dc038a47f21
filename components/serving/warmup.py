"""TF Serving's warm-up file (assets.extra/tf_serving_warmup_requests): PredictionLogs built from real eval rows.
Why and sources: docs/serving.md."""

from __future__ import annotations

import os
from typing import Iterable, Sequence

from components.errors import ServingGateError

# TF Serving replays this file, a TFRecord of PredictionLog, when it loads a version (tensorflow/serving,
# servables/tensorflow/saved_model_warmup_util.h: WarmupConsts::kRequestsFileName under assets.extra).
WARMUP_DIR, WARMUP_FILE = "assets.extra", "tf_serving_warmup_requests"
SERVING_SIGNATURE = "serving_default"  # trainer/export.py's; TF Serving's default signature name
MAX_REQUESTS = 1000  # the same header's WarmupConsts::kMaxNumRecords: a longer file fails to load


def warmup_path(model_dir: str) -> str:
    return os.path.join(model_dir, WARMUP_DIR, WARMUP_FILE)


def eval_rows(examples_uri: str, split: str, count: int, drop: Sequence[str] = ()) -> list[bytes]:
    """The first `count` serialized tf.Examples of ExampleGen's `split` (its files in name order: the same rows
    every time), without the features in `drop` (the label and ignored columns: clients don't send them)."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(os.path.join(examples_uri, f"Split-{split}", "*")))  # gs:// on Vertex
    if not files:
        raise ServingGateError(f"no {split} split under {examples_uri}: the warm-up requests are built from its rows")
    rows = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").take(count):
        example = tf.train.Example.FromString(record.numpy())
        for name in drop:
            if name in example.features.feature:
                del example.features.feature[name]
        # Maps serialize in no fixed order unless asked: the same rows must give the same bytes (the Pusher's
        # "identical to the version serving" check compares the candidate with its warm-up file).
        rows.append(example.SerializeToString(deterministic=True))
    if not rows:
        raise ServingGateError(f"the {split} split under {examples_uri} has no rows to build warm-up requests from")
    return rows


def input_key(model_dir: str) -> str:
    """The one input of serving_default, which must take serialized tf.Examples (a string vector)."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.lib.io import file_io

    saved = saved_model_pb2.SavedModel.FromString(file_io.read_file_to_string(
        os.path.join(model_dir, "saved_model.pb"), binary_mode=True))
    for meta in saved.meta_graphs:
        if SERVING_SIGNATURE in meta.signature_def:
            inputs = meta.signature_def[SERVING_SIGNATURE].inputs
            if len(inputs) == 1:
                [(key, info)] = inputs.items()
                if info.dtype == 7:  # DT_STRING
                    return key
            raise ServingGateError(f"{model_dir}: {SERVING_SIGNATURE} takes {sorted(inputs)}; warm-up requests from "
                                   "eval rows need one input of serialized tf.Examples (a string vector)")
    raise ServingGateError(f"{model_dir}: no {SERVING_SIGNATURE} signature, which TF Serving calls by default")


def requests(rows: Iterable[bytes], model_name: str, key: str) -> list:
    """One PredictionLog per row: a PredictRequest of a batch of one, as a client sends it."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    logs = []
    for row in rows:
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SERVING_SIGNATURE))
        request.inputs[key].CopyFrom(tf.make_tensor_proto([row], dtype=tf.string, shape=[1]))
        logs.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request)))
    if len(logs) > MAX_REQUESTS:
        raise ServingGateError(f"{len(logs)} warm-up requests: TF Serving reads at most {MAX_REQUESTS}")
    return logs


def write(model_dir: str, logs: Sequence) -> str:
    import tensorflow as tf

    path = warmup_path(model_dir)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString(deterministic=True))
    return path


def read(model_dir: str) -> list:
    """The PredictionLogs of a model's warm-up file, parsed with tensorflow-serving-api's protos."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = warmup_path(model_dir)
    if not tf.io.gfile.exists(path):
        raise ServingGateError(f"{model_dir} has no warm-up file ({WARMUP_DIR}/{WARMUP_FILE})")
    return [prediction_log_pb2.PredictionLog.FromString(r.numpy()) for r in tf.data.TFRecordDataset([path])]
