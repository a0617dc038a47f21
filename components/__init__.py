"""The project's own TFX components."""


def __getattr__(name: str):
    # `components.DatasetSnapshot` is the snapshot artifact's type name, which
    # TFX's Vertex entrypoint imports; resolved lazily so that importing
    # components.snapshot.store does not load TFX.
    if name == "DatasetSnapshot":
        from components.snapshot.component import DatasetSnapshot

        return DatasetSnapshot
    raise AttributeError(f"module 'components' has no attribute {name!r}")
