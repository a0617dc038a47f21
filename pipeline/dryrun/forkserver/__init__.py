"""A fork server for the dry run's task processes: their imports paid once per process, not per task.
client.py is the dry run's side, server.py the server (__main__.py its entry); docs/vertex.md says why it is safe."""

from pipeline.dryrun.forkserver.client import ForkedProcess, Run, active, close_kept, serving, start
from pipeline.dryrun.forkserver.policy import RUN_TIME_ENV, why_fresh
from pipeline.dryrun.forkserver.preload import preload_modules

__all__ = ["ForkedProcess", "RUN_TIME_ENV", "Run", "active", "close_kept", "preload_modules", "serving", "start",
           "why_fresh"]
