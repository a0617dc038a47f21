"""How ExampleGen splits the rows: a deterministic hash split, train:eval as data.train_buckets:data.eval_buckets."""

from __future__ import annotations

from tfx.proto import example_gen_pb2

from pipeline.config import Config


def split_output(config: Config) -> example_gen_pb2.Output:
    return example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
        example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=config.data.train_buckets),
        example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=config.data.eval_buckets)]))
