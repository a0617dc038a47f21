"""Runs on this machine: the LocalDagRunner run (runner.py), its lock and live progress, and the retraining
simulation with its generated spans."""
