"""How a run read each column: its role, its encoding and why, as the run prints it and the report and lineage
keep it (docs/data.md, column roles)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Optional

from trainer import roles as data_roles
from trainer.feature_config import ResolvedFeatures

if TYPE_CHECKING:  # the table itself needs no TensorFlow
    from trainer.features import CategoricalInput

HEADER = ("column", "role", "encoding", "why")
# On the TransformGraph artifact: the table as JSON (components/data/column_roles.py writes it).
ARTIFACT_PROPERTY = "column_roles"


def rows(resolved: ResolvedFeatures) -> list[dict[str, str]]:
    """One row per column, the label first, then by name."""
    config = resolved.config
    out = [{"column": resolved.label, "role": "label", "encoding": _label(resolved), "why": "from the config"}]
    encodings = {f.name: ("numeric", _numeric(f)) for f in resolved.numeric}
    encodings |= {f.name: ("categorical", _categorical(f)) for f in resolved.categorical}
    encodings |= {f.name: ("date", _date(f)) for f in resolved.date}
    encodings |= {f.name: ("boolean", "1.0 / 0.0, missing: the training mean") for f in resolved.boolean}
    encodings |= {f.name: ("text", f"bag of words: the {f.max_tokens} most frequent words seen >= "
                                   f"{config.min_frequency} times, a 0/1 input each") for f in resolved.text}
    for name in sorted({*encodings, *resolved.unused}):
        if name in encodings:
            role, encoding = encodings[name]
        elif name in config.ignore:
            role, encoding = "ignored", "not used"
        elif resolved.inferred.get(name) in data_roles.EXCLUDED:
            role = resolved.inferred[name]
            encoding = ("excluded: an id of the row, nothing to learn from (name it to use it)" if role == "id" else
                        "excluded: free text (list it under text for a bag of words, or categorical)")
        else:
            role, encoding = "unused", "not used (features.infer: false)"
        why = resolved.why.get(name, "")
        if name in resolved.inferred:
            why = f"inferred: {why}"
        out.append({"column": name, "role": role, "encoding": encoding, "why": why})
    return out


def _label(resolved: ResolvedFeatures) -> str:
    if resolved.task == "binary" and resolved.config.positive_class is not None:
        return f"binary, positive class {resolved.config.positive_class!r}"
    if resolved.label_log:
        return "regression, trained on log(1 + label), served on the label's own scale"
    return resolved.task


def _numeric(f) -> str:
    steps = ([f"clip {list(f.clip)}"] if f.clip else []) + (["log1p"] if f.log else [])
    steps.append(f"{f.bucketize} quantile buckets" if f.bucketize else "z-score" if f.z_score else "as is")
    return ", ".join(steps) + "; missing: the training mean"


def _categorical(f) -> str:
    if f.int_range is not None:
        return f"the integers {f.int_range[0]}..{f.int_range[1]} as ids, one more for missing/out of range"
    if f.hash_buckets:
        return f"hashed into {f.hash_buckets} buckets"
    parts = ["vocabulary"]
    if f.top_k:
        parts.append(f"at most {f.top_k} values")
    if f.min_frequency:
        parts.append(f"values seen >= {f.min_frequency} times")
    return ", ".join(parts) + f"; {f.oov_buckets} OOV bucket{'s' if f.oov_buckets > 1 else ''} for the rest"


def _date(f) -> str:
    parts = "days since 1970-01-01 (z-score), day of week, month" + (", hour" if f.hour else "")
    if f.each_day:
        parts += ", and each day as a category"
    return f"{parts}; read as {f.format}"


def with_sizes(table: list[dict[str, str]], inputs: dict[str, "CategoricalInput"]) -> list[dict[str, str]]:
    """The table with each categorical column's id count after the analysis and how the model reads the ids
    (`inputs`: column -> its model input, from Transform's output schema: trainer/features.py layout_from_schema)."""
    out = []
    for r in table:
        found = inputs.get(r["column"])
        if r["role"] == "categorical" and found is not None:
            read = f"an embedding of {found.embedding_dim}" if found.embedding_dim else "one-hot"
            r = {**r, "encoding": f"{r['encoding']}: {found.size:,} ids, {read}"}
        out.append(r)
    return out


def dumps(table: list[dict[str, str]]) -> str:
    return json.dumps(table)


def loads(text: Optional[str]) -> list[dict[str, str]]:
    return json.loads(text) if text else []


def format_table(table: list[dict[str, str]]) -> str:
    if not table:
        return ""
    widths = [max(len(h), *(len(r[h]) for r in table)) for h in HEADER[:2]]
    return "\n".join(f"{r['column']:<{widths[0]}}  {r['role']:<{widths[1]}}  {r['encoding']}"
                     + (f"  ({r['why']})" if r["why"] else "") for r in table)
