"""Self-hosted Kubeflow Pipelines 2.x (`pipeline.target: kubeflow`): compile, submit, schedules, preflight,
the kfp.Client set-up and the container entrypoint. Nothing is imported here. (docs/internals.md)"""
