"""The trainer's training input alone: time and peak RSS to load a shard and draw its first batches.

    python -m bench.shard_memory TRANSFORM_DIR [--copies 3] [--batches 50] [--label species_xf]

TRANSFORM_DIR is a finished run's Transform output (holds transform_graph/<id> and
transformed_examples/<id>/Split-train). `--copies N` lists the training files N times: N times
the rows in one shard, without another run. Prints the seconds to the first batch, the process's
peak RSS and a digest of the batches, so two checkouts can be compared number for number
(docs/trainer.md: the shard parsed whole vs in chunks). Not a timed test; run it by hand.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import resource
import time


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("transform_dir")
    p.add_argument("--copies", type=int, default=1)
    p.add_argument("--batches", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--label", default="species_xf", help="the transformed label feature (penguins' by default)")
    args = p.parse_args(argv)

    import tensorflow_transform as tft

    from trainer import data

    graphs = sorted(glob.glob(os.path.join(args.transform_dir, "transform_graph", "*")))
    examples = sorted(glob.glob(os.path.join(args.transform_dir, "transformed_examples", "*", "Split-train")))
    if not graphs or not examples:
        raise SystemExit(f"{args.transform_dir}: no transform_graph/<id> or transformed_examples/<id>/Split-train")
    spec = tft.TFTransformOutput(graphs[-1]).transformed_feature_spec()
    if args.label not in spec:
        raise SystemExit(f"--label {args.label!r} is not a transformed feature: {sorted(spec)}")
    start = time.perf_counter()
    ds = data.record_dataset_fn([os.path.join(examples[-1], "*.gz")] * args.copies, spec, args.batch_size,
                                label=args.label, training=True, seed=7)(None)
    digest, first = hashlib.sha256(), None
    for features, labels in ds.take(args.batches):
        first = first or time.perf_counter() - start
        for k in sorted(features):
            digest.update(features[k].numpy().tobytes())
        digest.update(labels.numpy().tobytes())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"copies={args.copies}: first batch after {first:.1f}s, peak RSS {peak:.0f} MB, "
          f"batches digest {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
