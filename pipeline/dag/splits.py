"""How ExampleGen splits the rows: a deterministic hash split into train, eval and test, as
data.train_buckets : data.eval_buckets : data.test_buckets (who reads which: components/splits.py)."""

from __future__ import annotations

from tfx.proto import example_gen_pb2

from components.splits import EVAL, TEST, TRAIN
from pipeline.config import Config


def split_buckets(config: Config) -> dict[str, int]:
    """Split name -> its hash buckets, in ExampleGen's order (a row's bucket range decides its split)."""
    data = config.data
    return {TRAIN: data.train_buckets, EVAL: data.eval_buckets, TEST: data.test_buckets}


def split_output(config: Config) -> example_gen_pb2.Output:
    return example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
        example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=buckets)
        for name, buckets in split_buckets(config).items()]))
