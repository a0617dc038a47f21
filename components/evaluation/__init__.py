"""The Evaluator: TFX's with TFMA extractors that drop the features before unbatching."""
