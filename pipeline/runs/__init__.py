"""What a run recorded, read back: the summary, the report and history pages, lineage, cost. Everything that
reads ML Metadata goes through mlmd.py. (docs/internals.md)"""
