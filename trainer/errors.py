"""The root of every error the project raises, and the trainer's own errors (the lowest layer, so all can derive)."""


class ProjectError(Exception):
    """Every error this project raises derives from this; pipeline/errors.py maps them to exit codes."""


class TrainerError(ProjectError):
    """The trainer cannot do what its config asks; the message names the setting."""


class FeatureConfigError(TrainerError, ValueError):
    """The features section does not fit the data; the message names the field."""


class BatchSizeError(TrainerError, ValueError):
    """trainer.global_batch_size does not split evenly over replicas and micro-batches."""


class StrategyError(TrainerError, RuntimeError):
    """The requested strategy cannot be created here; the message says why."""


class PreemptedError(TrainerError, RuntimeError):
    """Training stopped on SIGTERM after saving a checkpoint; a restart resumes it."""
