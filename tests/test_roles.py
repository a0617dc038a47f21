"""Column roles from generated columns (trainer/roles.py), the features section overriding them, the table a run
prints, and each role's encoding through real tf.Transform: dates, booleans, rare and unseen categories."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import schema_utils

from components.transform import TF_COMPAT_V1
from trainer import dates, features, role_table
from trainer import roles as data_roles
from trainer.feature_config import FeatureConfig, resolve
from trainer.features import CategoricalInput
from trainer.preprocessing import preprocessing_fn
from trainer.roles import Sample, infer_one

RNG = random.Random(35)
N = 400
DAYS = [datetime.date(2020, 1, 1) + datetime.timedelta(RNG.randrange(1500)) for _ in range(N)]


def _role(kind, values, rows=None) -> data_roles.Role:
    return infer_one(Sample("c", kind, values, rows or len(values)))


@pytest.mark.parametrize("kind, values, role", [
    ("float", [RNG.gauss(0, 1) for _ in range(N)], "numeric"),
    # Integers, without the label to compare them with: numbers (the rule for categories needs it, below).
    ("int", [RNG.randrange(10) for _ in range(N)], "numeric"),
    # Unique but spread out: amounts, not ids.
    ("int", RNG.sample(range(10**6), N), "numeric"),
    ("int", RNG.sample(range(5000, 5000 + N + 20), N), "id"),
    ("string", [f"C-{i:06d}" for i in RNG.sample(range(10**6), N)], "id"),
    ("string", [f"{RNG.choice(['Called', 'Wrote', 'Asked'])} about {RNG.choice(['billing', 'speed'])}; "
                f"ticket {RNG.randrange(10**4)}" for _ in range(N)], "text"),
    # Multi-word but few values: categories.
    ("string", [RNG.choice(["New York City", "Rio de Janeiro", "Los Angeles CA"]) for _ in range(N)], "categorical"),
    ("string", [RNG.choice(["true", "false"]) for _ in range(N)], "boolean"),
    ("string", [RNG.choice(["Yes", "no", "YES", "No"]) for _ in range(N)], "boolean"),
    ("int", [RNG.choice([0, 1]) for _ in range(N)], "boolean"),
    ("string", [d.isoformat() for d in DAYS], "date"),
    ("string", [RNG.choice(["Zürich", "São Paulo", "Ōsaka"]) for _ in range(N)], "categorical"),
    # Too few rows to call anything unique an id.
    ("string", ["a1", "b2", "c3"], "categorical"),
])
def test_each_role_is_recognised_on_generated_columns(kind, values, role):
    assert _role(kind, values).role == role


@pytest.mark.parametrize("cells, fmt, with_time", [
    ([d.isoformat() for d in DAYS], "iso", False),
    ([f"{d.isoformat()}T{RNG.randrange(24):02d}:{RNG.randrange(60):02d}:00Z" for d in DAYS], "iso", True),
    ([f"{d.isoformat()} {RNG.randrange(24):02d}:{RNG.randrange(60):02d}" for d in DAYS], "iso", True),
    ([d.strftime("%d/%m/%Y") for d in DAYS], "dmy_slash", False),  # days above 12 say it is day-first
    ([d.strftime("%m/%d/%Y") for d in DAYS], "mdy_slash", False),
    ([d.strftime("%Y/%m/%d") for d in DAYS], "ymd_slash", False),
    ([d.strftime("%d.%m.%Y") for d in DAYS], "dmy_dot", False),
])
def test_date_formats_are_told_apart_and_python_and_tensorflow_read_them_alike(cells, fmt, with_time):
    role = _role("string", cells + ["", "unknown"][:1])  # a few bad cells are tolerated
    assert (role.role, role.date_format, role.with_time) == ("date", fmt, with_time)
    parsed = dates.parse(tf.constant(cells), fmt)
    epoch = datetime.date(1970, 1, 1)
    np.testing.assert_array_equal(parsed["days"].numpy(), [(d - epoch).days for d in DAYS])
    np.testing.assert_array_equal(parsed["day_of_week"].numpy(), [d.weekday() for d in DAYS])
    np.testing.assert_array_equal(parsed["month"].numpy(), [d.month - 1 for d in DAYS])
    if with_time:
        hours = [int(c.replace("T", " ").split(" ")[1][:2]) for c in cells]
        np.testing.assert_array_equal(parsed["hour"].numpy(), hours)


def test_what_is_not_a_date_is_missing_not_a_wrong_date():
    parsed = dates.parse(tf.constant(["2024-02-30x", "2024-13-01", "", "soon", "03/31/2024 2:30 PM"]), "iso")
    assert np.isnan(parsed["days"].numpy()).all() and (parsed["month"].numpy() == -1).all()
    pm = dates.parse(tf.constant(["03/31/2024 2:30 PM", "03/31/2024 12:10 am"]), "mdy_slash")
    assert pm["hour"].numpy().tolist() == [14, 0]


def _with_label(columns: dict, label: list, task: str, kind: str = "float") -> dict:
    """Roles of generated columns (name -> (kind, values), every row present) beside a label."""
    rows = range(len(label))
    samples = [Sample(name, k, values, len(values), list(rows)) for name, (k, values) in columns.items()]
    return data_roles.infer([*samples, Sample("y", kind, label, len(label), list(rows))], "y", task)


def test_a_positive_skewed_number_is_read_on_a_log_scale_and_a_symmetric_one_is_not():
    rng = np.random.default_rng(45)
    incomes = rng.lognormal(10, 1, 2_000).round(2).tolist()
    found = infer_one(Sample("income", "float", incomes, 2_000))
    assert found.role == "numeric" and found.log and "positive and skewed" in found.why
    assert not infer_one(Sample("z", "float", rng.normal(50, 5, 2_000).tolist(), 2_000)).log
    # Below zero, a log is no reading of it, however skewed.
    assert not infer_one(Sample("x", "float", [v - 1e5 for v in incomes], 2_000)).log
    # The config wins either way; a regression label that is positive and skewed is learned on a log scale.
    columns = {"income": "float", "y": "float"}
    roles = {"income": found, "y": found}
    resolved = resolve(FeatureConfig(label="y", task="regression"), columns, roles)
    assert resolved.numeric[0].log and resolved.label_log
    resolved = resolve(FeatureConfig(label="y", task="regression", label_log=False,
                                     numeric=[{"income": {"log": False}}]), columns, roles)
    assert not resolved.numeric[0].log and not resolved.label_log
    label = role_table.rows(resolve(FeatureConfig(label="y", task="regression"), columns, roles))[0]
    assert label["encoding"] == "regression, trained on log(1 + label), served on the label's own scale"


def test_integer_codes_and_single_days_that_carry_the_label_become_categories():
    rng = np.random.default_rng(45)
    n = 4_000
    flight = rng.integers(1, 3_000, n)  # 3,000 codes: each code's own effect, no order in the number
    effect = rng.normal(0, 1, 3_000)
    amount = rng.integers(0, 5_000, n)  # a number whose effect is smooth
    calls = rng.poisson(1.5, n)  # a count of a few values, its effect a straight line
    weekday = rng.integers(1, 8, n)  # a few values, each its own effect
    day = rng.integers(0, 200, n)  # 200 days, each with its own weather
    weather = rng.normal(0, 1, 200)
    y = (effect[flight] + amount / 2_500 + 0.3 * calls + np.array([0, 1, -1, 1, -1, 1, -1, 1])[weekday]
         + weather[day] + rng.normal(0, 0.5, n)).tolist()
    stamps = [(datetime.date(2013, 1, 1) + datetime.timedelta(int(d))).isoformat() + "T10:00:00Z" for d in day]
    roles = _with_label({"flight": ("int", flight.tolist()), "amount": ("int", amount.tolist()),
                         "calls": ("int", calls.tolist()), "weekday": ("int", weekday.tolist()),
                         "when": ("string", stamps)}, y, "regression")
    assert roles["flight"].role == "categorical" and "as categories: each value's mean label" in roles["flight"].why
    assert roles["weekday"].role == "categorical"
    assert roles["amount"].role == roles["calls"].role == "numeric"
    assert roles["when"].role == "date" and roles["when"].codes and "each day a category too" in roles["when"].why
    resolved = resolve(FeatureConfig(label="y", task="regression"), {"flight": "int", "amount": "int", "calls": "int",
                                                                       "weekday": "int", "when": "string",
                                                                       "y": "float"}, roles)
    [when] = resolved.date
    assert when.each_day and "each day as a category" in role_table.rows(resolved)[-1]["encoding"]
    # Where the days carry nothing (one signup a day, the label unrelated), the date is a date alone.
    noise = _with_label({"when": ("string", stamps)}, rng.normal(0, 1, n).tolist(), "regression")
    assert noise["when"].role == "date" and not noise["when"].codes
    # Without the label's rows there is nothing to compare: integers of many values stay numbers.
    assert infer_one(Sample("flight", "int", flight.tolist(), n)).role == "numeric"


def test_a_constant_or_mostly_empty_column_gets_a_note():
    roles = data_roles.infer([Sample("year", "int", [2013] * 300, 300), Sample("joint", "float", [1.5, 2.0] * 60, 300)])
    assert roles["year"].why.endswith("constant: every sampled value is 2013, nothing to learn from")
    assert roles["joint"].why.endswith("mostly empty: 60% of 300 sampled rows have no value")


COLUMNS = {"churned": "string", "customer_id": "int", "signup": "string", "plan": "string", "notes": "string",
           "autopay": "string", "fee": "float"}
ROLES = {"customer_id": data_roles.Role("id", "100% distinct"), "signup": data_roles.Role("date", "dates", 0, "iso"),
         "plan": data_roles.Role("categorical", "4 distinct"), "notes": data_roles.Role("text", "7 words"),
         "autopay": data_roles.Role("boolean", "true/false"), "fee": data_roles.Role("numeric", "floats")}


def test_the_config_overrides_the_data_and_ids_and_text_are_left_out():
    base = dict(label="churned", task="binary", positive_class="yes")
    resolved = resolve(FeatureConfig(**base), COLUMNS, ROLES)
    assert [f.name for f in resolved.date] == ["signup"] and resolved.date[0].format == "iso"
    assert [f.name for f in resolved.boolean] == ["autopay"]
    [plan] = resolved.categorical
    assert (plan.name, plan.min_frequency, plan.top_k) == ("plan", 5, 1000)
    assert resolved.unused == ("customer_id", "notes")
    assert set(resolved.inputs) == {"signup", "plan", "autopay", "fee"}
    # Named, a column keeps the config's role whatever the data suggests.
    config = FeatureConfig(**base, categorical=["notes", {"signup": {"hash_buckets": 64}}], numeric=["customer_id"],
                           date=[{"name": "plan", "format": "dmy_slash"}], ignore=["autopay"])
    resolved = resolve(config, COLUMNS, ROLES)
    assert {f.name for f in resolved.categorical} == {"notes", "signup"} and resolved.unused == ("autopay",)
    assert [(f.name, f.format) for f in resolved.date] == [("plan", "dmy_slash")]
    # Without roles (no data seen): the types decide, as before.
    assert {f.name for f in resolve(FeatureConfig(**base), COLUMNS).categorical} == {"signup", "plan", "notes",
                                                                                       "autopay"}


def test_the_table_says_how_each_column_was_read_and_why():
    table = role_table.rows(resolve(FeatureConfig(label="churned", task="binary", positive_class="yes"),
                                    COLUMNS, ROLES))
    by_column = {r["column"]: r for r in table}
    assert table[0] == {"column": "churned", "role": "label", "encoding": "binary, positive class 'yes'",
                        "why": "from the config"}
    assert by_column["customer_id"]["role"] == "id" and "excluded" in by_column["customer_id"]["encoding"]
    assert by_column["notes"]["role"] == "text" and by_column["notes"]["why"] == "inferred: 7 words"
    assert by_column["signup"]["encoding"].startswith("days since 1970-01-01 (z-score), day of week, month")
    assert "values seen >= 5 times" in by_column["plan"]["encoding"]
    text = role_table.format_table(table)
    assert text.splitlines()[0].startswith("churned ") and "read as iso" in text
    assert role_table.loads(role_table.dumps(table)) == table
    # Asked for, free text is a bag of words.
    asked = role_table.rows(resolve(FeatureConfig(label="churned", task="binary", positive_class="yes",
                                                  text=[{"name": "notes", "max_tokens": 8}]), COLUMNS, ROLES))
    [notes] = [r for r in asked if r["column"] == "notes"]
    assert (notes["role"], notes["why"]) == ("text", "from the config")
    assert notes["encoding"].startswith("bag of words: the 8 most frequent words seen >= 5 times")
    # After the analysis, each category's id count (vocabulary and OOV buckets) joins its encoding.
    sized = {r["column"]: r["encoding"] for r in role_table.with_sizes(table, {"plan": CategoricalInput("plan", 5, 0)})}
    assert sized["plan"].endswith("1 OOV bucket for the rest: 5 ids, one-hot")
    assert sized["fee"] == by_column["fee"]["encoding"]
    embedded = role_table.with_sizes(table, {"plan": CategoricalInput("plan", 4_000, 32)})
    assert [r["encoding"] for r in embedded if r["column"] == "plan"][0].endswith(": 4,000 ids, an embedding of 32")


# Each role through real tf.Transform, as the pipeline's Transform runs it: the roles in custom_config.
# Eight signup days, five rows each: enough for each day to be a category of its own (each_day).
SIGNUPS = [DAYS[i % 8] for i in range(40)]
ANALYZED = [{"churned": [b"yes" if i % 3 else b"no"], "signup": [SIGNUPS[i].isoformat().encode()],
             "autopay": [RNG.choice([b"true", b"false"])], "fee": [float(i)],
             "plan": [b"rare" if i == 0 else RNG.choice([b"basic", b"pro"])],
             # Words in 40, 30, 20 and 10 rows, and one seen once (under min_frequency 5).
             "notes": ["; ".join(["late"] + ["payment"] * (i < 30) + ["Call"] * (i < 20) + ["back"] * (i < 10)
                                 + ["rare"] * (i == 0)).encode()]} for i in range(40)]
RAW = [{"churned": [b"no"], "signup": [b"2021-03-04"], "autopay": [b"YES"], "fee": [1.0], "plan": [b"pro"],
        "notes": [b"LATE, payment! rare"]},
       {"churned": [b"no"], "signup": [b"not a date"], "autopay": [b"maybe"], "fee": [1.0], "plan": [b"unheard"],
        "notes": [b""]}]


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    spec = {n: tf.io.FixedLenFeature([], tf.float32 if n == "fee" else tf.string) for n in ANALYZED[0]}
    metadata = tft.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    roles = {"signup": dataclasses.replace(ROLES["signup"], codes=True), "autopay": ROLES["autopay"],
             "plan": ROLES["plan"], "fee": ROLES["fee"]}
    config = {features.CONFIG_KEY: FeatureConfig(label="churned", task="binary", positive_class="yes",
                                                 text=[{"name": "notes", "max_tokens": 4}]).model_dump(),
              data_roles.CONFIG_KEY: data_roles.dumps(roles)}
    rows = [{k: v[0] for k, v in r.items()} for r in ANALYZED]
    raw = [{k: v[0] for k, v in r.items()} for r in RAW]
    with tft_beam.Context(temp_dir=str(tmp_path_factory.mktemp("tft")), force_tf_compat_v1=TF_COMPAT_V1):
        (train, _), transform_fn = ((rows, metadata)
                                    | tft_beam.AnalyzeAndTransformDataset(functools.partial(preprocessing_fn,
                                                                                           custom_config=config)))
        test, _ = ((raw, metadata), transform_fn) | tft_beam.TransformDataset()
    return train, test


def test_a_date_becomes_days_weekday_and_month_and_a_bad_one_missing(transformed):
    train, test = transformed
    days = np.array([(d - datetime.date(1970, 1, 1)).days for d in SIGNUPS], dtype=float)
    scored = (days - days.mean()) / days.std()
    np.testing.assert_allclose([r["signup_xf"] for r in train], scored, rtol=1e-4, atol=1e-4)
    # each_day: one id per day seen in training (8 of them), one more for an unseen day or a bad date.
    ids = {d: r["signup_day_xf"] for d, r in zip(SIGNUPS, train)}
    assert all(r["signup_day_xf"] == ids[d] for d, r in zip(SIGNUPS, train)) and sorted(ids.values()) == list(range(8))
    assert test[0]["signup_day_xf"] == test[1]["signup_day_xf"] == 8
    assert test[0]["signup_day_of_week_xf"] == datetime.date(2021, 3, 4).weekday()
    assert test[0]["signup_month_xf"] == 2
    assert test[1]["signup_xf"] == pytest.approx(0.0, abs=1e-5)  # missing: the mean
    assert (test[1]["signup_day_of_week_xf"], test[1]["signup_month_xf"]) == (7, 12)  # the missing ids
    assert "signup_hour_xf" not in test[0]  # dates without times have no hour


def test_a_boolean_is_one_or_zero_in_any_case_and_unknown_is_the_mean(transformed):
    train, test = transformed
    values = [r["autopay_xf"] for r in train]
    assert set(values) == {0.0, 1.0}
    assert test[0]["autopay_xf"] == 1.0
    assert test[1]["autopay_xf"] == pytest.approx(np.mean(values))


def test_a_rare_category_is_not_memorised_and_an_unseen_one_shares_its_bucket(transformed):
    train, test = transformed
    ids = {r["plan_xf"] for r in train}
    assert ids == {0, 1, 2}  # basic, pro, and the OOV bucket where 'rare' (seen once, under 5) went
    assert train[0]["plan_xf"] == 2 == test[1]["plan_xf"]


def test_free_text_asked_for_is_a_bag_of_its_most_frequent_words(transformed):
    train, test = transformed
    words = [[r[f"notes_word{i}_xf"] for i in range(4)] for r in (train[0], train[35], test[0], test[1])]
    # By frequency: late, payment, call (any case), back; 'rare' was seen once and is no input.
    assert words == [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]]
    assert "notes_word4_xf" not in train[0]


def test_the_sample_is_spread_over_a_sorted_split_not_its_first_rows(tmp_path):
    from tfx.types import artifact_utils, standard_artifacts

    from components.data.column_roles import sample

    # A table sorted by month, as ExampleGen keeps it: two files of 600 rows, months 1..12 in order.
    split = tmp_path / "Split-train"
    split.mkdir()
    months = [1 + i * 12 // 1200 for i in range(1200)]
    for part in range(2):
        with tf.io.TFRecordWriter(str(split / f"data_tfrecord-0000{part}-of-00002.gz"), options="GZIP") as w:
            for m in months[part * 600:(part + 1) * 600]:
                feature = {"month": tf.train.Feature(int64_list=tf.train.Int64List(value=[m]))}
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path)
    examples.split_names = artifact_utils.encode_split_names(["train"])
    [month] = sample(examples, {"month": "int"}, rows=100)
    assert month.rows == 100 and sorted(set(month.values)) == list(range(1, 13))
    assert month.index == list(range(100))
    # A split smaller than the sample is read whole.
    [whole] = sample(examples, {"month": "int"}, rows=5000)
    assert whole.rows == 1200 and whole.values == months
