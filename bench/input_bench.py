"""The trainer's input pipeline with and without its tf.data fixes (trainer/data.py InputOptions), side by side.

Both pipelines read the same transformed records, alternately, in this one process; each
figure is the best of `repeats` (the machine is shared, and interference only slows a run):

- training input alone (trainer/input_check.py's measure_input, the way the loop's host
  calls read it): the first call (reading and parsing the shard) and steady examples/s;
  no fix in InputOptions changes these, they show the shared machine's noise;
- evaluation: the first pass over the eval split and a later one (the in-memory cache).

Then the input-bound check itself after a real training run with configs/vertex.yaml's
trainer settings (2000 steps, global batch 256, 50 steps per host call): its verdict and
what it cost as a fraction of the training loop. Not a timed test; `make bench` runs it
(part 6), or `python -m bench.input_bench [--rows N] [--files N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

# Many small files: what an ExampleGen with many shards (or a Dataflow Transform) writes.
ROWS, FILES = 200_000, 32


def run(rows: int = ROWS, files: int = FILES, batch: int = 256, spe: int = 20, repeats: int = 3) -> dict:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tensorflow as tf

    from trainer import synthetic
    from trainer.config import TrainerConfig
    from trainer.data import TUNED, UNTUNED, record_dataset_fn
    from trainer.input_check import measure_input

    work = tempfile.mkdtemp(prefix="bench-input-")
    layout = synthetic.layout()
    spec = synthetic.feature_spec(layout)
    train = synthetic.write_examples(os.path.join(work, "train"), rows, shards=files, seed=0)
    evals = synthetic.write_examples(os.path.join(work, "eval"), rows // 4, shards=files, seed=1)
    cfg = TrainerConfig(global_batch_size=batch, steps_per_execution=spe)
    strategy = tf.distribute.get_strategy()
    sides: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for _ in range(repeats):
        for side, options in (("before", UNTUNED), ("after", TUNED)):
            train_fn = record_dataset_fn(train, spec, batch, label=layout.label, training=True, options=options)
            speed = measure_input(strategy, cfg, strategy.distribute_datasets_from_function(train_fn), calls=11)
            eval_fn = record_dataset_fn(evals, spec, batch, label=layout.label, training=False, options=options)
            eval_ds = eval_fn(tf.distribute.InputContext())
            passes = [_pass_seconds(eval_ds) for _ in range(3)]
            for key, value in (("first_call_seconds", speed.first_call_seconds),
                               ("train_examples_per_second", speed.examples_per_second),
                               ("eval_first_pass_seconds", passes[0]),
                               ("eval_later_pass_seconds", min(passes[1:]))):
                sides[side].setdefault(key, []).append(value)
    best = {side: {k: (max(v) if k.endswith("per_second") else min(v)) for k, v in figures.items()}
            for side, figures in sides.items()}
    return {"rows": rows, "files": files, "global_batch": batch, "steps_per_execution": spe, "repeats": repeats,
            "before": best["before"], "after": best["after"], "all": sides, "check": _check(train, evals, layout)}


def _pass_seconds(ds) -> float:
    """One full pass over `ds`, as each evaluation makes."""
    start = time.perf_counter()
    for _ in ds:
        pass
    return time.perf_counter() - start


def _check(train: str, evals: str, layout) -> dict:
    """A training run with configs/vertex.yaml's trainer settings and the input check after it, as the Trainer does."""
    from trainer import synthetic, tasks
    from trainer.config import TrainerConfig
    from trainer.fit import TransformedData, fit_and_export
    from trainer.model import build_model

    cfg = TrainerConfig(strategy="default", train_steps=2000, global_batch_size=256, steps_per_execution=50,
                        eval_every_steps=500, checkpoint_every_steps=2000)
    data = TransformedData(train, evals, synthetic.feature_spec(layout), label=layout.label,
                           task=tasks.Multiclass(synthetic.NUM_CLASSES),
                           model_fn=lambda c: build_model(layout, synthetic.NUM_CLASSES, c.hidden_units))
    with tempfile.TemporaryDirectory(prefix="bench-input-ckpt-") as ckpt:
        fitted = fit_and_export(cfg, lambda: data, checkpoint_dir=ckpt, logdir=None, export_dir=None,
                                export=lambda *_: None)
    d = fitted.result.input
    return {"train_steps": cfg.train_steps, "global_batch": cfg.global_batch_size,
            "loop_seconds": fitted.result.loop_seconds, "check_seconds": d.seconds, "overhead": d.overhead,
            "ratio": d.ratio, "verdict": d.verdict, "text": d.describe()}


def format_report(r: dict) -> str:
    b, a = r["before"], r["after"]
    lines = [f"{r['rows']:,} training rows in {r['files']} files, global batch {r['global_batch']}, "
             f"{r['steps_per_execution']} steps per host call; best of {r['repeats']}, alternating",
             f"{'':34} {'before':>10} {'after':>10} {'after/before':>13}"]
    for key, label in (("first_call_seconds", "first call: read + parse, s"),
                       ("train_examples_per_second", "training input alone, examples/s"),
                       ("eval_first_pass_seconds", "eval, first pass, s"),
                       ("eval_later_pass_seconds", "eval, later passes, s")):
        lines.append(f"{label:34} {b[key]:10.3f} {a[key]:10.3f} {a[key] / b[key]:12.2f}x")
    c = r["check"]
    lines.append(f"input check after {c['train_steps']} steps at batch {c['global_batch']}: {c['text']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.input_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    report = run(args.rows, args.files, repeats=args.repeats)
    print(format_report(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
