"""The dataset as configuration: which column is the label, what the task is, and
how every other column becomes a model input. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import Any, Literal, Mapping, Optional

from pydantic import Field, field_validator, model_validator

from trainer import date_formats
from trainer import roles as data_roles
from trainer.config import Section
from trainer.errors import FeatureConfigError

ColumnType = Literal["int", "float", "string"]
TaskName = Literal["multiclass", "binary", "regression"]
_IMPORT_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


class NumericFeature(Section):
    """A number, imputed with the training mean when missing. Applied in order:
    clip, log, then z-score or bucketize."""
    name: str
    clip: Optional[tuple[float, float]] = None  # [min, max]
    # log(1 + x); values below 0 count as 0. Empty: when the data is positive and skewed (trainer/roles.py).
    log: Optional[bool] = None
    # Quantile buckets computed on the training data; the feature becomes categorical.
    bucketize: Optional[int] = Field(None, ge=2, le=10_000)
    z_score: bool = True

    @field_validator("clip")
    @classmethod
    def _clip(cls, v):
        if v is not None and not v[0] < v[1]:
            raise ValueError(f"must be [min, max] with min < max, got {list(v)}")
        return v


class CategoricalFeature(Section):
    """A category: a vocabulary of the training values (most frequent `top_k`) plus
    `oov_buckets` for values never seen; or `hash_buckets` for ids with too many values;
    or, for integers in a known range (hours, days, area codes), `int_range: [min, max]`,
    the values themselves as ids, with one more id for missing and out-of-range values.
    Hashing and ranges need no pass over the data, so Transform is faster with them."""
    name: str
    top_k: Optional[int] = Field(None, ge=1)
    # Values seen fewer times in the training data go to the OOV buckets (not memorised); empty: none.
    min_frequency: Optional[int] = Field(None, ge=1)
    oov_buckets: int = Field(1, ge=1)
    hash_buckets: Optional[int] = Field(None, ge=2)
    int_range: Optional[tuple[int, int]] = None
    # auto: one-hot up to features.one_hot_max_size values, an embedding above.
    encoding: Literal["auto", "one_hot", "embedding"] = "auto"
    embedding_dim: Optional[int] = Field(None, ge=1, le=512)  # empty: from the size

    @model_validator(mode="after")
    def _one_encoding(self) -> "CategoricalFeature":
        chosen = [k for k in ("top_k", "hash_buckets", "int_range") if getattr(self, k) is not None]
        if len(chosen) > 1:
            raise ValueError(f"{self.name}: {' and '.join(chosen)} exclude each other (a vocabulary, hashing "
                             "or the integers themselves)")
        if self.int_range is not None and not self.int_range[0] <= self.int_range[1]:
            raise ValueError(f"{self.name}: int_range must be [min, max] with min <= max")
        return self


DateFormat = Literal[tuple(date_formats.FORMATS)]


class DateFeature(Section):
    """A date or timestamp string: days since 1970-01-01 (z-scored), day of week and month (and hour, for
    timestamps) as categories; a cell that is not a date of the format counts as missing."""
    name: str
    format: Optional[DateFormat] = None  # empty: the one the data shows (trainer/roles.py), else iso
    hour: Optional[bool] = None          # empty: when the data holds times
    # Also each day as a category (the days seen at least features.min_frequency times). Empty: when the
    # data shows single days carry the label (trainer/roles.py, the rule for codes).
    each_day: Optional[bool] = None


class TextFeature(Section):
    """Free text as a bag of words: the `max_tokens` most frequent words of the training data (seen at least
    features.min_frequency times), each a 0/1 model input saying whether the row holds it."""
    name: str
    max_tokens: int = Field(32, ge=1, le=1000)


class BooleanFeature(Section):
    """true/false, yes/no, y/n, t/f or 1/0 (any case) as 1.0/0.0; anything else, or missing, is the training mean."""
    name: str


def _entries(value: Any) -> Any:
    """`- name`, `- name: {options}` and `- {name: ..., options}` all mean one feature."""
    if not isinstance(value, list):
        return value
    out = []
    for item in value:
        if isinstance(item, str):
            out.append({"name": item})
        elif isinstance(item, dict) and "name" not in item and len(item) == 1:
            [(name, options)] = item.items()
            out.append({"name": name, **(options or {})})
        else:
            out.append(item)
    return out


# The features section's lists that give the columns they name a role.
_NAMED_ROLES = ("numeric", "categorical", "date", "boolean", "text")


class FeatureConfig(Section):
    label: str
    task: TaskName = "multiclass"
    # binary with a string label: the value that counts as 1. An integer label is 1 when non-zero.
    positive_class: Optional[str] = None
    # regression: train on log(1 + label) and serve exp(prediction) - 1, on the label's own scale. Empty: when the
    # label is positive and skewed (trainer/roles.py LOG_SKEW).
    label_log: Optional[bool] = None
    numeric: list[NumericFeature] = []
    categorical: list[CategoricalFeature] = []
    date: list[DateFeature] = []
    boolean: list[BooleanFeature] = []
    text: list[TextFeature] = []  # free text is left out unless listed here (or under categorical)
    # Columns the model never sees (ids, leaks of the label, free text).
    ignore: list[str] = []
    # Columns named nowhere above: numbers become numeric, strings categorical (true),
    # or they are left out (false).
    infer: bool = True
    one_hot_max_size: int = Field(32, ge=1)
    # Inferred categories: values seen fewer than min_frequency times in the training data share the OOV
    # bucket, and the vocabulary keeps at most max_vocabulary values (docs/data.md, column roles).
    min_frequency: int = Field(5, ge=1)
    max_vocabulary: int = Field(1000, ge=1)
    # Code hooks, by import path: your own Transform preprocessing_fn(inputs[, custom_config])
    # and model builder(layout, trainer_config) -> tf_keras.Model (see docs/data.md).
    preprocessing_fn: Optional[str] = None
    model_builder: Optional[str] = None

    @field_validator("numeric", "categorical", "date", "boolean", "text", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _entries(v)

    @field_validator("preprocessing_fn", "model_builder")
    @classmethod
    def _import_path(cls, v: Optional[str]) -> Optional[str]:
        if v in (None, ""):
            return None
        if not _IMPORT_PATH.match(v):
            raise ValueError(f"{v!r} is not an import path like 'package.module.function'")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "FeatureConfig":
        seen: dict[str, str] = {self.label: "label"}
        roles = [(role, f.name) for role in _NAMED_ROLES for f in getattr(self, role)]
        for role, name in roles + [("ignore", n) for n in self.ignore]:
            if name in seen:
                where = role if seen[name] == role else f"{seen[name]} and {role}"
                raise ValueError(f"{name!r} is named twice ({where}); a column has one role")
            seen[name] = role
        if self.positive_class is not None and self.task != "binary":
            raise ValueError(f"positive_class is for task binary, not {self.task}")
        if self.label_log is not None and self.task != "regression":
            raise ValueError(f"label_log is for task regression, not {self.task}")
        return self


@dataclasses.dataclass(frozen=True)
class ResolvedFeatures:
    """The features section applied to the data's columns: every model input, named."""
    config: FeatureConfig
    numeric: tuple[NumericFeature, ...]
    categorical: tuple[CategoricalFeature, ...]
    inferred: dict[str, str]  # column -> the role it was given without the config naming it
    unused: tuple[str, ...]   # columns neither named nor inferred (ignored, id-like, free text, infer: false)
    date: tuple[DateFeature, ...] = ()
    boolean: tuple[BooleanFeature, ...] = ()
    text: tuple[TextFeature, ...] = ()
    # column -> why it has its role: the rule and the figures from the data (trainer/roles.py), or the config.
    why: dict[str, str] = dataclasses.field(default_factory=dict)
    label_log: bool = False  # regression: trained on log(1 + label), served on the label's scale

    @property
    def label(self) -> str:
        return self.config.label

    @property
    def task(self) -> str:
        return self.config.task

    @property
    def inputs(self) -> tuple[str, ...]:
        """The raw columns a prediction needs: what a serving request must carry."""
        return tuple(f.name for f in (*self.numeric, *self.categorical, *self.date, *self.boolean, *self.text))

    def describe(self) -> str:
        def names(features):
            return ", ".join(f.name + (" (inferred)" if f.name in self.inferred else "") for f in features) or "none"
        return "\n".join([
            f"label: {self.label} ({self.task})",
            f"numeric: {names(self.numeric)}",
            f"categorical: {names(self.categorical)}",
            *([f"date: {names(self.date)}"] if self.date else []),
            *([f"boolean: {names(self.boolean)}"] if self.boolean else []),
            *([f"text: {names(self.text)}"] if self.text else []),
            f"not used: {', '.join(self.unused) or 'none'}",
        ])


_SCHEMA_TYPES = {"INT": "int", "FLOAT": "float", "BYTES": "string"}


def columns_from_schema(schema) -> dict[str, ColumnType]:
    """A tensorflow_metadata Schema's columns and their types, as `resolve` takes them."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    return {f.name: _SCHEMA_TYPES[schema_pb2.FeatureType.Name(f.type)] for f in schema.feature
            if schema_pb2.FeatureType.Name(f.type) in _SCHEMA_TYPES}


def not_a_column(field: str, name: str, columns, listing: str) -> FeatureConfigError:
    """`name` is not among `columns`; when a column differs from it only by surrounding whitespace or invisible
    marks (a byte-order mark, a zero-width or no-break space), the error names that column and the fix."""
    message = f"features.{field}: {name!r} is not a column of the data ({listing})"
    for column in columns:
        if column != name and _bare(column) == _bare(name):
            marks = sorted({f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in column
                            if c not in name and (c.isspace() or unicodedata.category(c) == "Cf")})
            message += (f"; the column {column!r} differs from it only by {', '.join(marks) or 'whitespace'}: "
                        f"remove that from the file's header row, or write the name as {column!r} in the config")
            break
    return FeatureConfigError(message)


def _bare(name: str) -> str:
    """The name without surrounding whitespace and without invisible format characters (Unicode Cf)."""
    return "".join(c for c in name if unicodedata.category(c) != "Cf").strip()


def resolve(config: FeatureConfig, columns: Mapping[str, ColumnType],
            roles: Optional[Mapping[str, data_roles.Role]] = None) -> ResolvedFeatures:
    """Check the section against the data's columns and their types, and infer the unnamed ones.

    `columns` may come from the schema, the raw feature spec or the input tensors:
    inferred features are sorted by name, so every caller gets the same order. `roles`, inferred from a sample
    of the training data (trainer/roles.py), decide the unnamed columns' roles; without them a column's type
    does (numbers numeric, strings categorical).
    """
    roles = roles or {}
    known = ", ".join(sorted(columns))

    def column(field: str, name: str) -> ColumnType:
        if name not in columns:
            raise not_a_column(field, name, columns, f"columns: {known}")
        return columns[name]

    label_type = column("label", config.label)
    _check_label(config, label_type)
    for f in config.numeric:
        if column("numeric", f.name) == "string":
            raise FeatureConfigError(f"features.numeric: {f.name!r} holds strings in the schema; "
                                     "list it under categorical")
    for f in config.categorical:
        kind = column("categorical", f.name)
        if kind == "float":
            raise FeatureConfigError(
                f"features.categorical: {f.name!r} is a float column in the schema; a float is not a category: "
                "list it under numeric (with bucketize: N to make it categorical)")
        if f.int_range is not None and kind != "int":
            raise FeatureConfigError(f"features.categorical: {f.name!r} has int_range but holds {kind}s")
    for f in config.date:
        if column("date", f.name) != "string":
            raise FeatureConfigError(f"features.date: {f.name!r} holds {columns[f.name]}s, not date strings")
    for f in config.boolean:
        column("boolean", f.name)
    for f in config.text:
        if column("text", f.name) != "string":
            raise FeatureConfigError(f"features.text: {f.name!r} holds {columns[f.name]}s, not text")
    for name in config.ignore:
        column("ignore", name)

    named = {config.label, *config.ignore,
             *(f.name for role in _NAMED_ROLES for f in getattr(config, role))}
    rest = sorted(set(columns) - named)
    inferred = {n: _role_of(columns[n], roles.get(n)) for n in rest} if config.infer else {}
    why = {n: "from the config" for n in named} | {n: roles[n].why if n in roles else f"{columns[n]}s"
                                                   for n in inferred}

    def new(role, make):
        return tuple(make(n) for n, r in inferred.items() if r == role)

    numeric = tuple(_log_scale(f, roles.get(f.name)) for f in
                    (*config.numeric, *new("numeric", lambda n: NumericFeature(name=n))))
    categorical = (*config.categorical, *new("categorical", lambda n: CategoricalFeature(
        name=n, top_k=config.max_vocabulary, min_frequency=config.min_frequency)))
    date = tuple(_date_format(f, roles.get(f.name)) for f in config.date)
    date += new("date", lambda n: _date_format(DateFeature(name=n), roles[n]))
    boolean = (*config.boolean, *new("boolean", lambda n: BooleanFeature(name=n)))
    text = tuple(config.text)
    if not (numeric or categorical or date or boolean or text):
        raise FeatureConfigError(f"features: no model inputs: name numeric or categorical features, or set "
                                 f"infer: true (columns: {known})")
    used = {config.label, *(f.name for f in (*numeric, *categorical, *date, *boolean, *text))}
    unused = tuple(n for n in sorted(columns) if n not in used)
    label_log = config.task == "regression" and (
        config.label_log if config.label_log is not None else bool(config.label in roles and roles[config.label].log))
    return ResolvedFeatures(config, tuple(numeric), tuple(categorical), inferred, unused, date, boolean, text=text,
                            why=why, label_log=label_log)


def _role_of(kind: ColumnType, role: Optional[data_roles.Role]) -> str:
    if role is None:
        return "categorical" if kind == "string" else "numeric"
    if role.role == "boolean" and kind == "float":
        return "numeric"
    return role.role


def _log_scale(f: NumericFeature, role: Optional[data_roles.Role]) -> NumericFeature:
    """The log scale the data asks for (a positive, skewed column) where the config leaves it empty."""
    if f.log is not None:
        return f
    return f.model_copy(update={"log": bool(role is not None and role.role == "numeric" and role.log)})


def _date_format(f: DateFeature, role: Optional[data_roles.Role]) -> DateFeature:
    """The format and hour the data shows where the config leaves them empty (iso, no hour, without data)."""
    seen = role if role is not None and role.role == "date" else None
    return f.model_copy(update={"format": f.format or (seen.date_format if seen else "iso"),
                                "hour": f.hour if f.hour is not None else bool(seen and seen.with_time),
                                "each_day": f.each_day if f.each_day is not None else bool(seen and seen.codes)})


def _check_label(config: FeatureConfig, label_type: ColumnType) -> None:
    if config.task == "regression" and label_type == "string":
        raise FeatureConfigError(f"features.task: regression needs a numeric label; {config.label!r} holds strings")
    if config.task == "multiclass" and label_type == "float":
        raise FeatureConfigError(f"features.task: multiclass needs a string or integer label; {config.label!r} "
                                 "is a float column (task: regression?)")
    if config.task == "binary":
        if label_type == "string" and config.positive_class is None:
            raise FeatureConfigError(f"features.positive_class: the binary label {config.label!r} holds strings; "
                                     "name the value that counts as positive")
        if label_type == "float":
            raise FeatureConfigError(f"features.task: binary needs a 0/1 integer or a string label; "
                                     f"{config.label!r} is a float column")
