"""The splits ExampleGen writes, and who reads which: Transform analyzes train and transforms all three; the
Trainer (and the Tuner's trials) fit on train and pick the exported step on eval; the serving gate's warm-up rows
come from eval; the Evaluator's metrics, its trivial model and the blessing use test, which nothing before it
reads (docs/internals.md, components/evaluation/trivial.py)."""

TRAIN, EVAL, TEST = "train", "eval", "test"
