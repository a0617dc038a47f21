"""Dataset snapshots: the content-addressed store (store.py, on the file
systems of storage.py; missing-value tokens such as `NA` emptied on the way
in by missing_values.py) and the TFX component that runs it as the DAG's first
step (component.py).

Nothing is imported here, so the store (no TFX) can be used without loading
TFX: import from the module that defines a name, e.g.
`from components.snapshot.component import Snapshot`.
"""
