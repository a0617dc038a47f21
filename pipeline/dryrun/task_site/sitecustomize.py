"""Loaded at start-up by every process a dry run starts (tasks, drivers, CustomJob replicas):
run.py puts this directory first on their PYTHONPATH. Never imported by the project itself.

A task process holds TensorFlow's, Beam's and TFX's millions of objects, and the
interpreter's last garbage collections at exit walk them all again: about 2 s a
process, some 13 processes a run, on a job that has already written its outputs.
gc.freeze() as the last exit handler (registered first, exit handlers run in reverse)
takes them out of those collections; everything else exit does (the other handlers,
flushing the standard streams, closing what reference counting frees) is unchanged.
A real Vertex container exits as it always does; only the dry run's wall time changes.
"""

import atexit
import gc

atexit.register(gc.freeze)
