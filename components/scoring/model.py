"""The SavedModel's serving_default as a Beam RunInference model handler, a chunk of rows per call."""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from components.scoring.rows import Chunk

SERVING_SIGNATURE = "serving_default"  # trainer/export.py's, the signature TF Serving calls


class ServingDefaultHandler(ModelHandler[Chunk, PredictionResult, Any]):
    """Loads `model_dir`'s serving_default once per worker (RunInference shares it) and calls it once per
    chunk with the chunk's serialized tf.Examples, as TF Serving's Predict would; the chunks are the batches,
    so RunInference's own batching passes them one at a time."""

    def __init__(self, model_dir: str):
        super().__init__(max_batch_size=1)
        self._model_dir = model_dir

    def load_model(self):
        import tensorflow as tf

        return tf.saved_model.load(self._model_dir).signatures[SERVING_SIGNATURE]

    def run_inference(self, batch: Sequence[Chunk], model, inference_args: Optional[dict] = None
                      ) -> Iterable[PredictionResult]:
        import tensorflow as tf

        for chunk in batch:
            outputs = model(examples=tf.constant(chunk.examples, tf.string)) if chunk.examples else {}
            yield PredictionResult(chunk, {k: v.numpy() for k, v in outputs.items()}, self._model_dir)

    def get_num_bytes(self, batch: Sequence[Chunk]) -> int:
        return sum(len(e) for chunk in batch for e in chunk.examples)  # the default pickles the batch

    def get_metrics_namespace(self) -> str:
        return "predict"


def output_dims(model_dir: str) -> dict[str, list[int]]:
    """{output key: dims (-1 unknown)} as serving_default declares them in saved_model.pb: read, not loaded (the
    RunInference handler is what loads the model)."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tfx.dsl.io import fileio

    from components.serving import serving_dir, serving_probe

    saved = saved_model_pb2.SavedModel()
    with fileio.open(f"{model_dir.rstrip('/')}/{serving_dir.SAVED_MODEL}", "rb") as f:
        saved.ParseFromString(f.read())
    return {key: dims for key, (_, dims, _) in (serving_probe.declared_outputs(saved) or {}).items()}


def class_names(model_dir: str, label: str) -> list[str]:
    """The label's vocabulary as the SavedModel carries it (Transform's asset file): the order of its
    `probabilities` (trainer/export.py takes the class names from the same vocabulary)."""
    from tfx.dsl.io import fileio

    from trainer.features import vocab_name

    path = f"{model_dir.rstrip('/')}/assets/{vocab_name(label)}"
    if not fileio.exists(path):
        return []
    with fileio.open(path, "rb") as f:
        return [line.decode("utf-8") for line in f.read().splitlines()]
