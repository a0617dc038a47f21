"""A fork server for the dry run's task processes, so their imports are paid once per process, not per task.

client.py is the dry run's side, server.py the server process (entry: __main__.py), policy.py when a task may
be forked, preload.py what the server imports, wire.py their messages; docs/vertex.md says what a forked task
shares with the server and why forking is safe.
"""

from pipeline.dryrun.forkserver.client import ForkedProcess, Run, active, close_kept, serving, start
from pipeline.dryrun.forkserver.policy import RUN_TIME_ENV, why_fresh
from pipeline.dryrun.forkserver.preload import preload_modules

__all__ = ["ForkedProcess", "RUN_TIME_ENV", "Run", "active", "close_kept", "preload_modules", "serving", "start",
           "why_fresh"]
