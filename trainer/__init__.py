"""Plain TensorFlow training code: usable and testable without TFX."""
