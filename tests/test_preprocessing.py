"""preprocessing_fn through real tf.Transform (Beam, in-process) on a few rows."""

import functools

import numpy as np
import pytest
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from components.transform import TF_COMPAT_V1
from pipeline.config import load_config
from trainer import features
from trainer.preprocessing import preprocessing_fn

PENGUINS = load_config("configs/local.yaml").features
NUMERIC = [f.name for f in PENGUINS.numeric]


def _row(species, island, bill_length, bill_depth, flipper, mass, sex):
    def opt(v):
        return [] if v is None else [v]
    return {"species": [species], "island": [island], "bill_length_mm": opt(bill_length),
            "bill_depth_mm": opt(bill_depth), "flipper_length_mm": opt(flipper), "body_mass_g": opt(mass),
            "sex": opt(sex), "year": [2008]}


TRAIN = [
    _row(b"Adelie", b"Torgersen", 39.0, 18.0, 180, 3700, b"male"),
    _row(b"Adelie", b"Dream", 41.0, 19.0, 190, 3900, b"female"),
    _row(b"Gentoo", b"Biscoe", 47.0, 15.0, 220, 5000, b"female"),
    _row(b"Chinstrap", b"Dream", 49.0, 18.0, 200, None, None),  # missing mass and sex
]
TEST = [
    _row(b"Gentoo", b"Atlantis", None, None, None, None, None),  # unseen island, all numbers missing
    _row(b"Adelie", b"Dream", 41.0, 19.0, 190, 3900, b"female"),
]


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    schema = text_format.Parse(open("schema/penguins.pbtxt").read(), schema_pb2.Schema())
    metadata = tft.DatasetMetadata(schema)
    fn = functools.partial(preprocessing_fn, custom_config={features.CONFIG_KEY: PENGUINS.model_dump()})
    with tft_beam.Context(temp_dir=str(tmp_path_factory.mktemp("tft")), force_tf_compat_v1=TF_COMPAT_V1):
        (train_out, _), transform_fn = (TRAIN, metadata) | tft_beam.AnalyzeAndTransformDataset(fn)
        test_out, _ = ((TEST, metadata), transform_fn) | tft_beam.TransformDataset()
    return train_out, test_out


def test_numeric_features_are_z_scored_and_missing_values_imputed(transformed):
    train, test = transformed
    masses = np.array([r[features.xf("body_mass_g")] for r in train])
    # The mean of the present values (3700, 3900, 5000) is imputed, so the
    # missing row lands exactly on 0 after scaling.
    assert masses[3] == pytest.approx(0.0, abs=1e-6)
    present = np.array([3700, 3900, 5000])
    expected = (present - present.mean()) / present.std()
    np.testing.assert_allclose(masses[:3], expected, rtol=1e-5)
    assert all(test[0][features.xf(n)] == pytest.approx(0.0, abs=1e-6) for n in NUMERIC)
    # year is ignored in the config: no model input.
    assert features.xf("year") not in train[0]


def test_categories_missing_and_unseen_get_their_own_ids(transformed):
    train, test = transformed
    islands_seen = {r[features.xf("island")] for r in train}
    assert islands_seen == {0, 1, 2}
    # An island never seen in training goes to the OOV bucket after the vocabulary.
    assert test[0][features.xf("island")] == 3
    sex = [r[features.xf("sex")] for r in train]
    assert len(set(sex)) == 3, "a missing sex is a category of its own, not dropped"


def test_label_is_encoded_by_vocabulary(transformed):
    train, _ = transformed
    labels = [r[features.xf("species")] for r in train]
    assert labels[0] == labels[1] != labels[2]
    assert sorted(set(labels)) == [0, 1, 2]


def test_bundled_csv_is_palmerpenguins_byte_for_byte():
    import importlib.resources

    shipped = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"
    with open("data/penguins/penguins.csv", "rb") as f:
        assert f.read() == shipped.read_bytes()
