"""What a version records of its inputs at export (trainer/model_inputs.py), which batch scoring reads instead of a
schema file; and the environment the command-line entry points set before TensorFlow loads."""

from __future__ import annotations

import os

import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from components.scoring.columns import ColumnType, from_model_inputs
from trainer import environment, model_inputs
from trainer.feature_config import FeatureConfig, resolve

COLUMNS = {"churned": "string", "customer_id": "int", "fee": "float", "plan": "string"}
SCHEMA = """
feature { name: "churned" type: BYTES domain: "churned" }
feature { name: "plan" type: BYTES string_domain { value: "basic" value: "premium" } }
string_domain { name: "churned" value: "no" value: "yes" }
"""


def _resolved(**features):
    config = FeatureConfig(label="churned", task="binary", positive_class="yes", ignore=["customer_id"], **features)
    return resolve(config, COLUMNS)


def test_the_record_is_what_serve_parses_and_survives_the_version_directory(tmp_path):
    spec = {"fee": tf.io.FixedLenFeature([1], tf.float32), "plan": tf.io.VarLenFeature(tf.string),
            "calls": tf.io.FixedLenFeature([1], tf.int64, default_value=[0])}
    record = model_inputs.describe(spec, _resolved(), text_format.Parse(SCHEMA, schema_pb2.Schema()))
    assert [(i.name, i.type, i.required) for i in record.inputs] == [
        ("calls", "int", False), ("fee", "float", True), ("plan", "string", False)]
    assert (record.label, record.task, record.ignore, record.classes) == ("churned", "binary", ("customer_id",),
                                                                          ("no", "yes"))
    assert {r["column"]: r["role"] for r in record.columns} == {
        "churned": "label", "customer_id": "ignored", "fee": "numeric", "plan": "categorical"}
    assert model_inputs.read(str(tmp_path)) is None  # a version exported before the record
    model_inputs.write(str(tmp_path), record)
    assert (tmp_path / "assets.extra" / "model_inputs.json").is_file()
    assert model_inputs.read(str(tmp_path)) == record
    columns = from_model_inputs(record, ["customer_id"], ["NA", ""])
    assert columns.types == {"calls": ColumnType.INT, "fee": ColumnType.FLOAT, "plan": ColumnType.STRING}
    assert (columns.required, columns.keep, columns.missing_values) == (frozenset({"fee"}), ("customer_id",), (b"NA",))
    with pytest.raises(ValueError, match="model input 'fee' is parsed as SparseFeature"):
        model_inputs.describe({"fee": tf.io.SparseFeature("i", "v", tf.float32, 3)}, _resolved(),
                              schema_pb2.Schema())


@pytest.mark.parametrize("schema, classes", [
    (SCHEMA, ("no", "yes")),  # the label's domain, by reference
    ('feature { name: "churned" type: BYTES string_domain { value: "yes" value: "no" } }', ("no", "yes")),
    ('feature { name: "churned" type: BYTES string_domain { value: "yes" value: "no" value: "maybe" } }',
     ("not yes", "yes")),
    ('feature { name: "churned" type: BYTES }', ("not yes", "yes")),  # no domain: SchemaGen saw too many values
])
def test_a_binary_string_labels_classes_are_named_from_the_schema(schema, classes):
    assert model_inputs.binary_classes(_resolved(), text_format.Parse(schema, schema_pb2.Schema())) == classes


def test_an_integer_or_multiclass_label_names_no_binary_classes():
    int_label = resolve(FeatureConfig(label="customer_id", task="binary"), COLUMNS)
    assert model_inputs.binary_classes(int_label, schema_pb2.Schema()) == ()
    assert model_inputs.binary_classes(resolve(FeatureConfig(label="plan"), COLUMNS), schema_pb2.Schema()) == ()


def test_the_entry_points_set_keras_2_and_the_repo_on_the_childrens_path():
    env = {"TF_USE_LEGACY_KERAS": "0", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": "/elsewhere"}
    environment.prepare(env)
    assert env == {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
                   "PYTHONPATH": os.pathsep.join([environment.REPO_ROOT, "/elsewhere"])}
    empty: dict = {}
    environment.prepare(empty)
    assert empty == {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "1", "PYTHONPATH": environment.REPO_ROOT}
    assert os.path.isfile(os.path.join(environment.REPO_ROOT, "pipeline", "__main__.py"))
    environment.prepare(empty)  # once on the path is enough
    assert empty["PYTHONPATH"] == environment.REPO_ROOT
