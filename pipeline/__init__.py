"""The pipeline: its config, create_pipeline, the local runner and the CLI;
runs/ reads back what runs recorded, vertex/ compiles, submits and schedules
on Vertex AI."""
