"""What a `python -m pipeline` command can fail with, and the exit codes.

Commands raise these (or return an exit code); `pipeline.cli.main` alone turns
them into a message on stderr and an exit code. Lower layers raise their own
types (e.g. components.snapshot.store.SnapshotError), which the CLI maps too.
"""

# Exit codes a scheduler or CI can act on. A finished run's outcome becomes one in one place:
# pipeline.runs.summary.exit_code (used by `run` and `dryrun`).
EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_NOT_PUSHED = 0, 1, 2, 3
# Nothing new: no span the serving model was not trained on (data.skip_when_no_new_span), or the
# candidate is the model already serving, so nothing was pushed; not a failure, but not a new model.
EXIT_NOTHING_NEW = 4
# Another run holds the pipeline root's run lock past pipeline.lock_wait_seconds.
EXIT_BUSY = 5


class ConfigError(ValueError):
    """The config or an argument asks for what we can't do (a wrong value, or a config the command does not
    take); the message names the field or the reason, and what to do instead. Exit 2."""


class CommandFailed(RuntimeError):
    """A command could not do its job; the message says what and where. Exit 1."""


class PipelineFailed(CommandFailed):
    """A component raised; the message names it and the log file has the details."""


class VertexError(CommandFailed):
    """A Vertex AI or GCS call failed; the message says what to do about it."""


class LineageError(CommandFailed, LookupError):
    """The model or version is not in this metadata store, or its history is incomplete."""
