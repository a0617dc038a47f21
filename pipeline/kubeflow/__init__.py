"""Self-hosted Kubeflow Pipelines 2.x (`pipeline.target: kubeflow`): the config section (config.py),
compiling for the open-source backend (compile.py), the kfp.Client set-up (client.py), submitting
(submit.py), recurring runs (schedules.py), preflight (preflight.py) and the container entrypoint
the compiled spec runs under the open-source launcher (entrypoint.py). Nothing is imported here."""
