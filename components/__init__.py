"""The project's own TFX components."""
