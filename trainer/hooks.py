"""What the training loop does around its steps: checkpoints, TensorBoard
summaries, profiling and preemption. (docs/internals.md)"""

from __future__ import annotations

import logging
import shutil
import signal
import threading
from typing import Optional

import tensorflow as tf

# The loop's logger, not this module's: these records are part of the loop's
# report (pipeline/progress.py puts the trainer.loop logger on the console).
log = logging.getLogger("trainer.loop")


class Preemption:
    """Turns SIGTERM (what Vertex sends before it preempts) into a flag the loop polls."""

    def __init__(self):
        self.requested = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        log.warning("SIGTERM received: saving a checkpoint after the current host call")
        self.requested = True

    def close(self):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


class Checkpointer:
    """Periodic checkpoints. Every worker saves (a collective) into `save_dir`,
    which is `directory` only on the chief; all restore from `directory`."""

    def __init__(self, directory: str, save_dir: str, keep: int, **trackables):
        self.directory = directory
        self.checkpoint = tf.train.Checkpoint(**trackables)
        self.manager = tf.train.CheckpointManager(self.checkpoint, save_dir, max_to_keep=keep)

    def restore(self) -> Optional[str]:
        latest = tf.train.latest_checkpoint(self.directory)
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            log.info("restored %s", latest)
        return latest

    def save(self, step: int) -> str:
        return self.manager.save(checkpoint_number=step)

    def close(self):
        """Drop a non-chief's private copies: only the chief's are ever restored."""
        if self.manager.directory != self.directory:
            shutil.rmtree(self.manager.directory, ignore_errors=True)


class Summaries:
    """TensorBoard scalars from the chief; a no-op writer elsewhere."""

    def __init__(self, logdir: Optional[str], chief: bool):
        self.writer = (tf.summary.create_file_writer(logdir) if logdir and chief
                       else tf.summary.create_noop_writer())

    def write(self, step: int, scalars: dict[str, float]):
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)

    def flush(self):
        self.writer.flush()


class Profiler:
    """Captures a tf.profiler trace over the [start, stop) step window, at host-call granularity."""

    def __init__(self, window: list[int], logdir: str):
        self.window, self.logdir, self.active = window, logdir, False

    def before(self, step: int):
        if self.window and not self.active and self.window[0] <= step < self.window[1]:
            tf.profiler.experimental.start(self.logdir)
            self.active = True

    def after(self, step: int):
        if self.active and step >= self.window[1]:
            self.close()

    def close(self):
        if self.active:
            tf.profiler.experimental.stop()
            self.active = False
