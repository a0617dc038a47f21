"""Loaded at start-up by every process a dry run starts (run.py puts this directory first on their PYTHONPATH):
it skips the interpreter's last garbage collections at exit. (docs/internals.md)"""

import atexit
import gc

atexit.register(gc.freeze)
