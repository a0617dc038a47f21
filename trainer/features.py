"""The dataset's contract as the model code sees it: raw columns and their roles.

Everything that names a feature imports it from here (Transform, model,
export, tests), so renaming a column is a one-line change.
"""

LABEL = "species"
NUMERIC = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")
CATEGORICAL = ("island", "sex")
# Extra buckets for categories never seen while computing the vocabulary.
OOV_BUCKETS = 1


def xf(name: str) -> str:
    """Name of a feature after Transform."""
    return f"{name}_xf"


LABEL_XF = xf(LABEL)
