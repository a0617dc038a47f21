"""What serves a model: TF Serving's directory, config and labels, the serving gate and warm-up, the Vertex AI
endpoint, the canary check with its metric sources, and ServingModel."""
