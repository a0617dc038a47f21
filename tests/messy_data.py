"""A generated customer table as a new user brings it: an integer id, ISO signup dates, a plan, a fee with empty
cells, support calls, a true/false flag, regions with non-ASCII names, free-text notes with quotes and
semicolons, and a yes/no label; and the logistic regression it is judged against."""

from __future__ import annotations

import csv
import datetime
import io
from pathlib import Path

import numpy as np

PLANS = {"basic": 0.6, "standard": 0.0, "premium": -0.5, "family": -0.3}
REGIONS = {"Zürich": -0.3, "São Paulo": 0.4, "Ōsaka": 0.0, "Kraków": 0.2, "Montréal": -0.1, "Reykjavík": 0.1,
           "Malmö": -0.2, "Đà Nẵng": 0.3}
EPOCH = datetime.date(2019, 1, 1)
NOTE_PARTS = (["Called about billing", "Asked for a discount", "Moved house", "Upgraded the router",
               "Complained about speed", "Said \"too expensive\"", "Happy with support", "Wants paper invoices"],
              ["follow up next week", "no action needed", "sent the FAQ", "offered 10% off", "escalated to tier 2",
               "waiting on \"engineering\"", "closed the ticket", "will call back"])


def customers(rows: int = 2_000, seed: int = 35) -> list[dict[str, str]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.permutation(rows):
        days = int(rng.integers(0, 6 * 365))
        plan = str(rng.choice(list(PLANS)))
        region = str(rng.choice(list(REGIONS)))
        fee = float(np.round(rng.gamma(4.0, 9.0), 2))
        calls = int(rng.poisson(1.5))
        autopay = bool(rng.random() < 0.6)
        score = (-0.6 + 1.1 * (days < 365) - 0.25 * days / 365 + PLANS[plan] + REGIONS[region] + 0.02 * (fee - 36)
                 + 0.45 * calls - 0.8 * autopay)
        churned = rng.random() < 1 / (1 + np.exp(-score))
        note = f"{rng.choice(NOTE_PARTS[0])}; {rng.choice(NOTE_PARTS[1])}" + (f"; ticket #{rng.integers(1e5)}"
                                                                              if rng.random() < 0.5 else "")
        out.append({"customer_id": str(10_001 + i), "signup_date": (EPOCH + datetime.timedelta(days)).isoformat(),
                    "plan": plan, "monthly_fee": "" if rng.random() < 0.08 else f"{fee:.2f}",
                    "support_calls": str(calls), "autopay": "true" if autopay else "false", "region": region,
                    "notes": note, "churned": "yes" if churned else "no"})
    return out


def to_csv(rows: list[dict[str, str]], excel: bool = False) -> bytes:
    """As a CSV file; `excel`: as Excel's "CSV UTF-8" saves it (a byte-order mark, CRLF line endings)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\r\n" if excel else "\n")
    writer.writeheader()
    writer.writerows(rows)
    return (b"\xef\xbb\xbf" if excel else b"") + buffer.getvalue().encode()


def write(directory: Path, rows: list[dict[str, str]], excel: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "customers.csv").write_bytes(to_csv(rows, excel))
    return directory


def design(rows: list[dict[str, str]], fee_mean: float) -> np.ndarray:
    """The obvious columns as numbers: years since 2019-01-01, fee (empty: the mean), calls, autopay, plan and region
    one-hot."""
    def row(r):
        days = (datetime.date.fromisoformat(r["signup_date"]) - EPOCH).days
        fee = float(r["monthly_fee"]) if r["monthly_fee"] else fee_mean
        return [days / 365, fee, float(r["support_calls"]), r["autopay"] == "true",
                *(r["plan"] == p for p in PLANS), *(r["region"] == g for g in REGIONS)]
    return np.array([row(r) for r in rows], dtype=float)


def logistic_regression_auc(train: list[dict[str, str]], test: list[dict[str, str]]) -> float:
    """Held-out AUC of scikit-learn's logistic regression on the obvious columns, standardized."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    fees = [float(r["monthly_fee"]) for r in train if r["monthly_fee"]]
    x_train, x_test = design(train, float(np.mean(fees))), design(test, float(np.mean(fees)))
    y_train = np.array([r["churned"] == "yes" for r in train])
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(x_train, y_train)
    return float(roc_auc_score([r["churned"] == "yes" for r in test], model.predict_proba(x_test)[:, 1]))


KINDS = {"customer_id": "int", "support_calls": "int", "monthly_fee": "float"}  # the rest are strings


def example(row: dict[str, str]) -> bytes:
    """A raw row as a TF Serving client sends it: a tf.Example with the CSV's types, empty cells left out."""
    import tensorflow as tf

    features = {}
    for name, cell in row.items():
        if cell == "" or name == "churned":
            continue
        kind = KINDS.get(name, "string")
        features[name] = (tf.train.Feature(int64_list=tf.train.Int64List(value=[int(cell)])) if kind == "int" else
                          tf.train.Feature(float_list=tf.train.FloatList(value=[float(cell)])) if kind == "float" else
                          tf.train.Feature(bytes_list=tf.train.BytesList(value=[cell.encode()])))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def served_probabilities(model_dir: str, rows: list[dict[str, str]]) -> np.ndarray:
    import tensorflow as tf

    serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    return serve(examples=tf.constant([example(r) for r in rows]))["probability"].numpy().reshape(-1)


def served_auc(model_dir: str, rows: list[dict[str, str]]) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score([r["churned"] == "yes" for r in rows], served_probabilities(model_dir, rows)))
