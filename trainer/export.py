"""SavedModel export: what TF Serving and TFMA call. Why: docs/internals.md."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tf_keras.src.saving.legacy.saved_model import utils as keras_saving

from trainer import features, model_inputs
from trainer.feature_config import ResolvedFeatures
from trainer.tasks import Task

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"


def request_spec(raw_spec: dict, resolved: ResolvedFeatures) -> dict:
    """What serve parses: the raw feature spec without the label and the columns the model does not use, which
    clients do not send."""
    unsent = {resolved.label, *resolved.unused}
    return {k: v for k, v in raw_spec.items() if k not in unsent}


class ServingModule(tf.Module):
    def __init__(self, model: tf_keras.Model, tf_transform_output: tft.TFTransformOutput, task: Task,
                 resolved: ResolvedFeatures):
        super().__init__()
        self.model = model
        self.task = task
        self.tft_layer = tf_transform_output.transform_features_layer()
        self.class_names = None
        if resolved.task == "multiclass":
            self.class_names = tf.constant(tf_transform_output.vocabulary_by_name(
                features.vocab_name(resolved.label)))
        self._raw_spec = tf_transform_output.raw_feature_spec()
        self._request_spec = request_spec(self._raw_spec, resolved)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False)
    def serve(self, examples):
        transformed = self.tft_layer(tf.io.parse_example(examples, self._request_spec))
        return self.task.serve(self.model(transformed, training=False), self.class_names)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False)
    def transform_features(self, examples):
        return self.tft_layer(tf.io.parse_example(examples, self._raw_spec))


def export_serving_model(model: tf_keras.Model, tf_transform_output: tft.TFTransformOutput, task: Task,
                         resolved: ResolvedFeatures, export_dir: str) -> str:
    module = ServingModule(model, tf_transform_output, task, resolved)
    # TF Serving and TFMA call only the two signatures. By default tf_keras also
    # traces every layer's call (with autograph) into the SavedModel: ~85% of
    # the export's time. Keras's own save(save_traces=False) sets this scope; it
    # is internal API, so tests/test_pipeline_e2e.py checks the export has no layer traces.
    with keras_saving.keras_option_scope(save_traces=False):
        tf.saved_model.save(module, export_dir, signatures={
            SERVING_SIGNATURE: module.serve, TRANSFORM_SIGNATURE: module.transform_features})
    # What serve parses and how the columns were read, beside the graph: batch scoring reads the version alone.
    model_inputs.write(export_dir, model_inputs.describe(
        request_spec(tf_transform_output.raw_feature_spec(), resolved), resolved,
        tf_transform_output.raw_metadata.schema))
    return export_dir
