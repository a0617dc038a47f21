"""What a run recorded, read during or after it: live progress (progress.py),
the end-of-run summary (summary.py), the HTML report (report.py) and lineage
(lineage.py). Everything that reads ML Metadata goes through mlmd.py."""
