"""The one error hierarchy and the exit codes: every error the project raises derives from ProjectError
(trainer/errors.py), and `exit_code_for` is the one table the CLI turns errors into exit codes with."""

from components.errors import ComponentError, SnapshotError
from trainer.errors import ProjectError, TrainerError

__all__ = ["ProjectError", "TrainerError", "ComponentError"]

# Exit codes a scheduler or CI can act on. A finished run's outcome becomes one in one place:
# pipeline.runs.summary.exit_code (used by `run` and `dryrun`).
EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_NOT_PUSHED = 0, 1, 2, 3
# Nothing new: no span the serving model was not trained on (data.skip_when_no_new_span), or the
# candidate is the model already serving, so nothing was pushed; not a failure, but not a new model.
EXIT_NOTHING_NEW = 4
# Another run holds the pipeline root's run lock past pipeline.lock_wait_seconds.
EXIT_BUSY = 5


class ConfigError(ProjectError, ValueError):
    """The config or an argument asks for what we can't do (a wrong value, or a config the command does not
    take); the message names the field or the reason, and what to do instead. Exit 2."""


class CommandFailed(ProjectError, RuntimeError):
    """A command could not do its job; the message says what and where. Exit 1."""


class PipelineFailed(CommandFailed):
    """A component raised; the message names it and the log file has the details."""


class RunLocked(CommandFailed):
    """Another run holds the pipeline root's lock. Exit 5."""


class LineageError(CommandFailed, LookupError):
    """The model or version is not in this metadata store, or its history is incomplete."""


class VertexError(CommandFailed):
    """A Vertex AI or GCS call failed; the message says what to do about it."""


class KubeflowError(CommandFailed):
    """A call to the KFP API server failed; the message says what to do about it."""


class SpecError(CommandFailed):
    """The spec asks for something the backend refuses or the dry run cannot execute; names the task and field."""


class ConditionGroupError(SpecError):
    """The compiled conditions don't fit one `dsl.If`-style group; names the task and field."""


class ConditionError(ProjectError, ValueError):
    """A trigger condition failed to evaluate (a missing key, a type mismatch): the driver, so the task, fails."""


class LauncherInputError(ProjectError, ValueError):
    """The executor input names an artifact whose type cannot be known (pipeline/kubeflow/entrypoint.py)."""


class EmulatorError(ProjectError, RuntimeError):
    """A dry run's stand-in service (fake-gcs-server) did not start or answer; names its log."""


class JobRefused(ProjectError, ValueError):
    """A CustomJob asks for something the dry run's training service cannot run here; names the field."""


class StandInRefused(ProjectError, ValueError):
    """A request a dry run's stand-in of a Google API refuses as the API would (pipeline/dryrun/vertex_endpoints.py):
    its HTTP status and a message naming the field; the stand-in answers it in Google's JSON error format."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# Most specific first: the first entry an error is an instance of gives its exit code.
_EXIT_CODES = ((ConfigError, EXIT_BAD_CONFIG), (RunLocked, EXIT_BUSY), (CommandFailed, EXIT_FAILED),
               (SnapshotError, EXIT_FAILED))


def exit_code_for(error: BaseException) -> int | None:
    """The exit code of an error a command raised; None for one the CLI does not turn into a message."""
    return next((code for kind, code in _EXIT_CODES if isinstance(error, kind)), None)
