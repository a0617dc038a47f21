"""The errors the project's TFX components raise: each stops its component, and so the run, naming what is wrong."""

from trainer.errors import ProjectError


class ComponentError(ProjectError):
    """A component cannot go on; the message names the file, span, feature or run that is the reason."""


class SnapshotError(ComponentError, RuntimeError):
    """A snapshot cannot be made or used; the message names the file or digest."""


class SpanError(ComponentError, RuntimeError):
    """The span layout or the selection is wrong; the message names the directory."""


class SpanLayoutError(ComponentError, ValueError):
    """The input is not a snapshot in span layout; the message names the path."""


class CsvInputError(ComponentError, ValueError):
    """A CSV file does not fit its header or the others; the message names the file and record."""


class ModelInputsError(ComponentError, LookupError):
    """Nothing says which columns a model version reads: it carries no record of its inputs (exported before
    versions had one, trainer/model_inputs.py) and no schema was given; the message names the version."""


class DataAnomaliesError(ComponentError, RuntimeError):
    """The examples break the schema; the message lists every anomaly."""


class DataDriftError(ComponentError, RuntimeError):
    """The newest data drifted beyond a threshold; the message lists every drifted feature."""


class LeaseBusy(ComponentError, RuntimeError):
    """Another run holds the root past the wait; the message names it."""


class LeaseLost(ComponentError, RuntimeError):
    """This run's gs:// lease was taken over (it expired): another run may now be writing."""


class TuningFailed(ComponentError, RuntimeError):
    """The search found no hyperparameters: too many trials failed, or the Vertex job failed or was cancelled;
    the message names the trials or the job and its error."""


class NoTuningToReuse(ComponentError, LookupError):
    """tuning.reuse: latest, but no search has run on this root; the message names where it looked."""


class ServingGateError(ComponentError, ValueError):
    """The candidate or its warm-up requests can't be checked for serving at all (no eval rows, no serving_default
    taking serialized tf.Examples); the message names the model or split. A check that ran and failed is no error:
    the candidate is refused and the reason recorded (components/serving/serving_gate.py)."""


class ServingConfigChanged(ComponentError, RuntimeError):
    """TF Serving's model config file changed between our read and our write (another writer); nothing was
    written, the message names the file and the generation we read."""


class RolloutError(ComponentError, ValueError):
    """A label move that can't be made (no canary to promote, no earlier stable to roll back to, a version that is
    not on disk); the message names the label and version, nothing changed."""


class CanaryMetricsError(ComponentError, ValueError):
    """The canary check's metrics can't be read as their source defines them (a recorded scrape not named by its
    time, a Monitoring series without the label that tells the tracks apart); the message names the file or the
    series. Nothing is decided and no label moves."""


class VertexStateMismatch(ComponentError, RuntimeError):
    """What the Vertex endpoint or the Model Registry says serves is not what our record in the serving dir says
    (someone changed the endpoint by hand, or a move failed midway); the message names both. Nothing is moved."""


class CanaryUnobserved(ComponentError):
    """A canary check's source can't show both tracks over the window yet (too few scrapes, no series): the check
    waits, saying why; nothing moves."""


class EvaluationInputError(ComponentError, ValueError):
    """The Evaluator can't score the trivial model on the rows it evaluates (no rows, no labels, a label TFMA's
    metric is undefined for, no Transform output to read them from); the message names the split and the label."""


class SliceConfigError(ComponentError, ValueError):
    """A slice the config names can't be made from the evaluated examples (a column none of them has), or the
    eval config lacks the metric the slice gates bound; the message names evaluator.slices or the metric."""


class SliceCountMismatch(ComponentError, RuntimeError):
    """TFMA counted a slice's examples otherwise than the Evaluator did before it ran, so a slice gate may have
    been applied where evaluator.slice_min_examples says not to; the message names the slices."""
