"""The project's own TFX components."""


def __getattr__(name: str):
    # `components.DatasetSnapshot` (and `components.Predictions`) are artifact type names, which
    # TFX's Vertex entrypoint imports; resolved lazily so that importing
    # components.data.snapshot.store does not load TFX.
    if name == "DatasetSnapshot":
        from components.data.snapshot.component import DatasetSnapshot

        return DatasetSnapshot
    if name == "Predictions":
        from components.bulk_inferrer import Predictions

        return Predictions
    raise AttributeError(f"module 'components' has no attribute {name!r}")
