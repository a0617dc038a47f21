"""Training throughput: our custom loop vs the `model.fit` of TFX's penguin example.

The baseline mirrors tfx.examples.penguin.penguin_utils_keras.run_fn: the
dataset comes from the TFX data accessor's factory (tfxio over the transformed
examples, batched, repeated), the model is compiled with Adam,
SparseCategoricalCrossentropy(from_logits) and SparseCategoricalAccuracy under
MirroredStrategy, and `fit` runs with Keras' default steps_per_execution of 1.
Both sides train the same model (trainer/model.py) on the same transformed
records with the same global batch, in this one process. Steady state: fit's
second epoch, and our loop's time after its first host call (both exclude
tracing). Not a timed test; `make bench-trainer` runs it.

    python bench/trainer_bench.py [--batch 20 256] [--spe 1 10 100] [--repeats 3] [--transformed DIR]

As a function: `run(...)` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

TARGET_RATIO = 3.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The local pipeline's Transform output (`make run`), the data the trainer really sees.
PIPELINE_TRANSFORM = os.path.join(REPO, "output", "pipeline_root", "penguin-tpu", "Transform")


def run(batch_sizes=(20, 256), steps_per_execution=(1, 10, 100), steps: int = 1000, repeats: int = 3,
        transform_dir: str | None = None) -> dict:
    """Examples/s of `fit` and of our loop at each steps_per_execution, per global batch.

    Each figure is the best of `repeats` measurements: the machine is shared,
    and interference only ever slows a run down.

    `transform_dir` is a Transform component's output dir (with transform_graph/
    and transformed_examples/); by default the local pipeline's if it exists,
    else synthetic records in the same format.
    """
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    data = _data(transform_dir)
    fit = {b: _fit_examples_per_second(data, b, steps, repeats) for b in batch_sizes}
    # Ours second: the loop turns on op determinism for the whole process.
    loop = {b: {spe: max(_loop_examples_per_second(data, b, spe, steps) for _ in range(repeats))
                for spe in steps_per_execution}
            for b in batch_sizes}
    return {"data": data["source"], "steps": steps, "repeats": repeats, "target_ratio": TARGET_RATIO,
            "results": [{"global_batch": b, "fit_examples_per_second": fit[b],
                         "loop_examples_per_second": loop[b],
                         "ratio": {spe: loop[b][spe] / fit[b] for spe in steps_per_execution}}
                        for b in batch_sizes]}


def _data(transform_dir: str | None) -> dict:
    from tensorflow_transform.tf_metadata import schema_utils

    from trainer import synthetic, tasks

    if transform_dir is None and os.path.isdir(PIPELINE_TRANSFORM):
        transform_dir = PIPELINE_TRANSFORM
    if transform_dir:
        import tensorflow_transform as tft

        from pipeline.config import load_config
        from trainer.features import CONFIG_KEY
        from trainer.spec import training_spec

        graph = _latest(os.path.join(transform_dir, "transform_graph"))
        tft_output = tft.TFTransformOutput(graph)
        pattern = os.path.join(_latest(os.path.join(transform_dir, "transformed_examples")), "Split-train", "*")
        features = load_config(os.path.join(REPO, "configs", "local.yaml")).features
        spec = training_spec({CONFIG_KEY: features.model_dump()}, tft_output, pattern)
        return {"source": f"Transform output {graph}", "pattern": pattern,
                "spec": tft_output.transformed_feature_spec(),
                "schema": tft_output.transformed_metadata.schema, "layout": spec.layout, "task": spec.task}
    layout = synthetic.layout()
    pattern = synthetic.write_examples(tempfile.mkdtemp(prefix="bench-data-"), 2000, model_layout=layout)
    spec = synthetic.feature_spec(layout)
    return {"source": "synthetic records in Transform's format (run `make run` for the real ones)",
            "pattern": pattern, "spec": spec, "schema": schema_utils.schema_from_feature_spec(spec),
            "layout": layout, "task": tasks.Multiclass(synthetic.NUM_CLASSES)}


def _latest(directory: str) -> str:
    runs = sorted(glob.glob(os.path.join(directory, "*")), key=lambda p: int(os.path.basename(p)))
    if not runs:
        raise FileNotFoundError(f"no Transform output under {directory}")
    return runs[-1]


# The model both sides train: the penguin MLP every result in bench/results/ was measured with.
HIDDEN_UNITS = [16, 16]


def _build_model(data: dict):
    from trainer.model import build_model

    return build_model(data["layout"], data["task"].width, HIDDEN_UNITS)


def _fit_examples_per_second(data: dict, batch: int, steps: int, repeats: int) -> float:
    import tensorflow as tf
    import tf_keras
    from tfx.components.util import tfxio_utils
    from tfx.proto import example_gen_pb2
    from tfx_bsl.public import tfxio

    from trainer.budget import STEP_BUDGET

    # What the Trainer's data_accessor.tf_dataset_factory does for Examples artifacts.
    dataset = tfxio_utils.make_tfxio(
        file_pattern=[data["pattern"]], telemetry_descriptors=["bench"],
        payload_format=example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE, schema=data["schema"],
    ).TensorFlowDataset(tfxio.TensorFlowDatasetOptions(batch_size=batch, label_key=data["layout"].label)).repeat()

    with tf.distribute.MirroredStrategy().scope():
        model = _build_model(data)
        model.compile(optimizer=tf_keras.optimizers.Adam(STEP_BUDGET["learning_rate"]),
                      loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[tf_keras.metrics.SparseCategoricalAccuracy()])
    marks: list[float] = []  # epoch begin/end times
    timer = tf_keras.callbacks.LambdaCallback(on_epoch_begin=lambda *_: marks.append(time.perf_counter()),
                                              on_epoch_end=lambda *_: marks.append(time.perf_counter()))
    # The first epoch traces; each later one is a measurement.
    model.fit(dataset, steps_per_epoch=steps, epochs=1 + repeats, callbacks=[timer], verbose=0)
    return steps * batch / min(end - begin for begin, end in zip(marks[2::2], marks[3::2]))


def _loop_examples_per_second(data: dict, batch: int, spe: int, steps: int) -> float:
    from trainer.budget import plan
    from trainer.config import TrainerConfig
    from trainer.data import record_dataset_fn
    from trainer.loop import train
    from trainer.strategy import make_strategy

    cfg, _ = plan(TrainerConfig(strategy="auto", train_steps=steps, global_batch_size=batch, steps_per_execution=spe,
                                eval_every_steps=steps, checkpoint_every_steps=steps), lambda: 0, replicas=1)
    train_fn = record_dataset_fn(data["pattern"], data["spec"], batch, label=data["layout"].label, training=True,
                                 seed=cfg.seed)
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as ckpt:
        result = train(make_strategy(cfg.strategy), cfg, lambda: _build_model(data), train_fn, None, ckpt,
                       task=data["task"])
    return result.examples_per_second


def format_report(report: dict) -> str:
    spes = list(report["results"][0]["ratio"])
    lines = [f"trainer throughput, examples/s, best of {report['repeats']} runs of {report['steps']} steps "
             f"(data: {report['data']})",
             f"{'global batch':>12} {'model.fit':>10} " + " ".join(f"{'loop spe=' + str(s):>14}" for s in spes)
             + "   " + " ".join(f"{'ratio spe=' + str(s):>13}" for s in spes)]
    for row in report["results"]:
        lines.append(f"{row['global_batch']:>12} {row['fit_examples_per_second']:>10.0f} "
                     + " ".join(f"{row['loop_examples_per_second'][s]:>14.0f}" for s in spes) + "   "
                     + " ".join(f"{row['ratio'][s]:>12.2f}x" for s in spes))
    best = min(max(row["ratio"].values()) for row in report["results"])
    lines.append(f"best ratio at every batch size >= {best:.2f}x (target {report['target_ratio']:.0f}x): "
                 + ("met" if best >= report["target_ratio"] else "NOT met"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, nargs="+", default=[20, 256], help="global batch sizes")
    parser.add_argument("--spe", type=int, nargs="+", default=[1, 10, 100], help="steps_per_execution values")
    parser.add_argument("--steps", type=int, default=1000, help="training steps per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per figure; the best counts")
    parser.add_argument("--transformed", help="a Transform output dir (default: the local pipeline's)")
    args = parser.parse_args(argv)
    print(format_report(run(args.batch, args.spe, args.steps, args.repeats, args.transformed)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, REPO)
    sys.exit(main())
