"""`make bench`: this pipeline against TFX's own penguin example, and at scale."""
