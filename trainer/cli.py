"""`python -m trainer`: the training loop without TFX, on Transform-format TFRecords.
Why and sources: docs/internals.md."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import sys
from typing import Optional

import tensorflow as tf
import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from trainer import pod, synthetic, tasks
from trainer.config import Section, TrainerConfig, validate_uri
from trainer.errors import BatchSizeError, StrategyError
from trainer.fit import TransformedData, fit_and_export
from trainer.model import build_model

# Exit codes: preempted is "try again" (EX_TEMPFAIL); a restart resumes.
EXIT_OK, EXIT_BAD_CONFIG, EXIT_PREEMPTED = 0, 2, 75


class JobConfig(Section):
    trainer: TrainerConfig = TrainerConfig()
    # Globs of gzipped TFRecords in Transform's transformed_examples format.
    train_files: str
    eval_files: Optional[str] = None
    vocab_sizes: dict[str, int] = synthetic.VOCAB_SIZES
    num_classes: int = Field(synthetic.NUM_CLASSES, ge=2)
    checkpoint_dir: str
    # The chief writes the trained Keras model here as a SavedModel; other workers nowhere.
    export_dir: Optional[str] = None
    logdir: Optional[str] = None
    # This process's outcome as JSON: steps, eval history, the exported step, a digest of the exported weights.
    result_file: Optional[str] = None

    @field_validator("train_files", "eval_files", "checkpoint_dir", "export_dir", "logdir", "result_file")
    @classmethod
    def _paths(cls, v: Optional[str], info) -> Optional[str]:
        return None if v is None else validate_uri(v, info.field_name)

    @model_validator(mode="after")
    def _pod_paths(self) -> "JobConfig":
        """On a pod each host reads its own shard, and each writes its variables' checkpoint and export
        shards and the summaries from its own CPU (tensorflow/python/checkpoint/functional_saver.py,
        MultiDeviceSaver.save: a shard per task, on that task): only a gs:// path is the same for all.
        The result file is the client's own (tf.io.gfile from Python), so it may stay local."""
        if pod.is_remote(self.trainer.tpu):
            for field in ("train_files", "eval_files", "checkpoint_dir", "export_dir", "logdir"):
                value = getattr(self, field)
                if value is not None and not value.startswith("gs://"):
                    raise ValueError(f"{field} must be a gs:// URI when trainer.tpu names a TPU pod "
                                     f"({self.trainer.tpu!r}): every host reads or writes it (got {value!r}; "
                                     f"{pod.POD_DOCS})")
        return self


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train (and resume) from a job config")
    train.add_argument("config", help="YAML or JSON job config")
    train.add_argument("--cpu-devices", type=int, default=0, metavar="N",
                       help="split the CPU into N logical devices (rehearse multi-device strategies)")
    synth = sub.add_parser("synthesize", help="write learnable synthetic data in Transform's format")
    synth.add_argument("--out", required=True)
    synth.add_argument("--examples", type=int, default=2000)
    synth.add_argument("--shards", type=int, default=2)
    synth.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    if args.command == "synthesize":
        print(synthetic.write_examples(args.out, args.examples, shards=args.shards, seed=args.seed))
        return EXIT_OK
    try:
        with open(args.config) as f:
            job = JobConfig.model_validate(yaml.safe_load(f))
    except (OSError, yaml.YAMLError, ValidationError) as e:
        print(f"error: job config {args.config}: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    return run_job(job, args.cpu_devices)


def run_job(job: JobConfig, cpu_devices: int = 0) -> int:
    if cpu_devices:
        # Must happen before anything initialises the TF runtime (importing TF doesn't).
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_devices)

    cfg = job.trainer
    layout = synthetic.layout(vocab_sizes=job.vocab_sizes)

    def read_data() -> TransformedData:
        return TransformedData(job.train_files, job.eval_files, synthetic.feature_spec(layout),
                               label=layout.label, task=tasks.Multiclass(job.num_classes),
                               model_fn=lambda c: build_model(layout, job.num_classes, c.hidden_units, c.l2,
                                                              c.dropout), layout=layout)

    try:
        fitted = fit_and_export(cfg, read_data, checkpoint_dir=job.checkpoint_dir, logdir=job.logdir,
                                export_dir=job.export_dir, export=tf.saved_model.save)
    except (StrategyError, BatchSizeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    result = fitted.result
    if job.result_file:
        weights = b"".join(w.numpy().tobytes() for w in result.model.weights)
        summary = {"step": result.step, "initial_step": result.initial_step, "preempted": result.preempted,
                   "stopped_early": result.stopped_early, "stop": result.stop,
                   "budget": dataclasses.asdict(fitted.budget), "chief": fitted.chief,
                   "replicas": fitted.replicas, "history": result.history,
                   "examples_per_second": result.examples_per_second,
                   "exported": dataclasses.asdict(result.exported) if result.exported else None,
                   "input": dataclasses.asdict(result.input) if result.input else None,
                   "weights_sha256": hashlib.sha256(weights).hexdigest()}
        with tf.io.gfile.GFile(job.result_file, "w") as f:
            json.dump(summary, f)
    return EXIT_PREEMPTED if result.preempted else EXIT_OK
