"""The Tuner step: TFX's Tuner with our executor (KerasTuner over our loop locally, a Vertex HyperparameterTuningJob
on Vertex), and LatestTuning for tuning.reuse: latest. docs/tuning.md."""

# The Tuner's custom_config keys the pipeline sets (pipeline/dag/tuning.py): the tuning section, the trials' Vertex
# CustomJob (on Vertex only: {"project", "region", "job_spec", "labels"}, the Trainer's) and where the last search
# is kept (tuning.reuse: latest).
TUNING_KEY, TRIAL_JOB_KEY, LATEST_DIR_KEY = "tuning", "tuning_trial_job", "tuning_dir"
# The tuning step's node ids in the DAG, by which the run summary finds its record.
TUNER_ID, LATEST_TUNING_ID = "Tuner", "LatestTuning"
