"""The Tuner step: TFX's Tuner with our executor (KerasTuner over our loop locally, a Vertex HyperparameterTuningJob
on Vertex), and LatestTuning for tuning.reuse: latest. docs/tuning.md."""
