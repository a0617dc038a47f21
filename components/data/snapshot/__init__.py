"""Dataset snapshots: the content-addressed store and the TFX component that makes one as the DAG's first step.
Nothing is imported here, so the store can be used without loading TFX. (docs/internals.md)"""
