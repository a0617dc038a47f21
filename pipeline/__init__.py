"""The pipeline layer: config, the DAG, the local run, the shared KFP spec, one package per cloud target,
the dry run, run records and the CLI (README's layout table names each package). (docs/internals.md)"""
