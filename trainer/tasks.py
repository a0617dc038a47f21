"""What the task (features.task) decides: the model's output width, the loss, the
training metric, what serving returns, and the metric the Evaluator gates on. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow as tf
import tf_keras

# Serving outputs.
PROBABILITIES, CLASS_ID, CLASS_NAME = "probabilities", "class_id", "class_name"
PROBABILITY, PREDICTION = "probability", "prediction"
# The binary task serves class 1 when its probability is above this; the report's confusion matrix is at it.
DECISION_THRESHOLD = 0.5


@dataclasses.dataclass(frozen=True)
class MainMetric:
    """The metric the Evaluator gates on and the summary reports."""
    key: str         # the name in TFMA's results
    tfma_class: str  # MetricConfig.class_name
    label: str       # how summaries call it
    higher_is_better: bool
    fraction: bool = True  # lies in [0, 1]


# The bar by default is the trivial model's value on the same rows (components/evaluation/trivial.py); the
# evaluator section may set a stricter one.
MAIN_METRICS = {
    "multiclass": MainMetric("sparse_categorical_accuracy", "SparseCategoricalAccuracy", "accuracy", True),
    "binary": MainMetric("auc", "AUC", "auc", True),
    "regression": MainMetric("root_mean_squared_error", "RootMeanSquaredError", "rmse", False, fraction=False),
}
# Reported next to the main metric; not gated.
EXTRA_METRICS = {"multiclass": (), "binary": ("BinaryAccuracy",), "regression": ("MeanAbsoluteError",)}


class Task:
    name: str             # features.task
    width: int            # model outputs per example
    metric_name: str      # the training metric in logs and TensorBoard
    prediction_key: str   # the serving output the Evaluator reads

    def per_example_loss(self, labels, outputs):
        raise NotImplementedError

    def metric(self, name: str) -> tf_keras.metrics.Metric:
        """A metric whose update_state(labels, outputs) takes the model's raw outputs."""
        raise NotImplementedError

    def serve(self, outputs, class_names: Optional[tf.Tensor]) -> dict:
        raise NotImplementedError

    @property
    def main(self) -> MainMetric:
        return MAIN_METRICS[self.name]

    def main_metric(self, name: str) -> Optional[tf_keras.metrics.Metric]:
        """The Evaluator's main metric from raw outputs, when the task's own metric is not it already."""
        return None


class Multiclass(Task):
    name, metric_name, prediction_key = "multiclass", "accuracy", PROBABILITIES

    def __init__(self, num_classes: int):
        self.width = num_classes

    def per_example_loss(self, labels, outputs):
        return tf_keras.losses.sparse_categorical_crossentropy(labels, outputs, from_logits=True)

    def metric(self, name):
        return tf_keras.metrics.SparseCategoricalAccuracy(name)

    def serve(self, outputs, class_names):
        probabilities = tf.nn.softmax(outputs)
        class_id = tf.argmax(probabilities, axis=1)
        return {PROBABILITIES: probabilities, CLASS_ID: class_id, CLASS_NAME: tf.gather(class_names, class_id)}


class _LogitAccuracy(tf_keras.metrics.BinaryAccuracy):
    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, tf.reshape(y_pred, [-1]), sample_weight)


class _LogitAuc(tf_keras.metrics.AUC):
    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, tf.reshape(y_pred, [-1]), sample_weight)


class Binary(Task):
    name, width, metric_name, prediction_key = "binary", 1, "accuracy", PROBABILITY

    def per_example_loss(self, labels, outputs):
        return tf.nn.sigmoid_cross_entropy_with_logits(tf.cast(labels, outputs.dtype), tf.reshape(outputs, [-1]))

    def metric(self, name):
        return _LogitAccuracy(name, threshold=0.0)  # logit > 0 is probability > 0.5

    def main_metric(self, name):
        return _LogitAuc(name=name, from_logits=True)  # the Evaluator gates on AUC, not accuracy

    def serve(self, outputs, class_names):
        probability = tf.sigmoid(tf.reshape(outputs, [-1]))
        return {PROBABILITY: probability, CLASS_ID: tf.cast(probability > DECISION_THRESHOLD, tf.int64)}


class _Rmse(tf_keras.metrics.RootMeanSquaredError):
    def __init__(self, name, task: "Regression"):
        super().__init__(name)
        self.task = task

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, self.task.prediction(y_pred), sample_weight)


class Regression(Task):
    """The model predicts the standardized label, which keeps the loss well scaled
    whatever the label's units; serving and the metric undo the scaling. With `log` (features.label_log, or a
    positive skewed label: trainer/roles.py) it is log(1 + label) that is standardized and learned: serving and
    the metric return exp(.) - 1, on the label's own scale, so the Evaluator's RMSE is in the label's units.
    The label itself stays raw in the Transform graph (TFMA reads it there)."""
    name, width, metric_name, prediction_key = "regression", 1, "rmse", PREDICTION

    def __init__(self, mean: float, std: float, log: bool = False):
        self.mean, self.std, self.log = float(mean), float(std) or 1.0, log

    def target(self, labels):
        """The label on the scale the model learns: standardized, after log(1 + max(label, 0)) with `log`."""
        labels = tf.cast(labels, tf.float32)
        if self.log:
            labels = tf.math.log1p(tf.maximum(labels, 0.0))
        return (labels - self.mean) / self.std

    def prediction(self, outputs):
        """The model's outputs on the label's own scale."""
        value = self.mean + self.std * tf.reshape(tf.cast(outputs, tf.float32), [-1])
        return tf.math.expm1(value) if self.log else value

    def per_example_loss(self, labels, outputs):
        return tf.square(self.target(labels) - tf.reshape(tf.cast(outputs, tf.float32), [-1]))

    def metric(self, name):
        return _Rmse(name, self)

    def serve(self, outputs, class_names):
        return {PREDICTION: self.prediction(outputs)}


TASKS: dict[str, type[Task]] = {t.name: t for t in (Multiclass, Binary, Regression)}
