"""`python -m pipeline.kubeflow.entrypoint`: TFX's v2 container entrypoint made to run under the open-source
KFP launcher; its module path is baked into compiled specs. Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Iterable, Optional

from pipeline.errors import LauncherInputError

LAUNCHER_OUTPUTS = frozenset({"executor-logs"})  # launcher-managed, see 2. above


def _untyped(artifact_type) -> bool:
    kind = artifact_type.WhichOneof("kind")
    if kind is None:
        return True
    if kind == "instance_schema":
        return not artifact_type.instance_schema.strip()
    if kind == "schema_title":
        return artifact_type.schema_title.startswith("system.")
    return False


def repair_executor_input(invocation_json: str, inputs_spec_json: Optional[str]) -> str:
    """The ExecutorInput JSON as TFX's entrypoint can read it (see the module docstring)."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    executor_input = pipeline_spec_pb2.ExecutorInput()
    # ignore_unknown_fields as TFX's own parse does (kubeflow_v2_run_executor._run_executor).
    json_format.Parse(invocation_json, executor_input, ignore_unknown_fields=True)
    declared = pipeline_spec_pb2.ComponentInputsSpec()
    if inputs_spec_json:
        json_format.Parse(inputs_spec_json, declared, ignore_unknown_fields=True)
    for name, artifacts in executor_input.inputs.artifacts.items():
        for artifact in artifacts.artifacts:
            if not _untyped(artifact.type):
                continue
            if name not in declared.artifacts:
                raise LauncherInputError(
                    f"input artifact {name!r} arrived without a type ({_describe(artifact.type)}) and the "
                    "component's inputs spec (--json_serialized_inputs_spec_args) declares no such input; "
                    "compile with pipeline/kubeflow/compile.py (pipeline spec 2.1)")
            artifact.type.CopyFrom(declared.artifacts[name].artifact_type)
    outputs = executor_input.outputs.artifacts
    for name in list(outputs):
        if name in LAUNCHER_OUTPUTS:
            del outputs[name]
            continue
        for artifact in outputs[name].artifacts:
            if _untyped(artifact.type):
                raise LauncherInputError(f"output artifact {name!r} has no TFX type ({_describe(artifact.type)})")
    return json_format.MessageToJson(executor_input)


def _describe(artifact_type) -> str:
    kind = artifact_type.WhichOneof("kind")
    return f"{kind}={getattr(artifact_type, kind)!r}" if kind else "no type"


def output_uris(invocation_json: str) -> list[str]:
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    executor_input = pipeline_spec_pb2.ExecutorInput()
    json_format.Parse(invocation_json, executor_input, ignore_unknown_fields=True)
    return sorted({a.uri for name, artifacts in executor_input.outputs.artifacts.items()
                   if name not in LAUNCHER_OUTPUTS for a in artifacts.artifacts if a.uri})


def remove_directory_markers(uris: Iterable[str], client=None) -> list[str]:
    """Delete the zero-byte `.../` objects under each gs:// URI (the URI's own marker included);
    returns the gs:// names deleted. Local URIs have none."""
    uris = [u for u in uris if u.startswith("gs://")]
    if not uris:
        return []
    if client is None:
        from google.cloud import storage

        client = storage.Client()
    from google.api_core import exceptions as gexc

    removed = []
    for uri in uris:
        bucket_name, _, prefix = uri[len("gs://"):].partition("/")
        prefix = prefix.rstrip("/")
        bucket = client.bucket(bucket_name)
        for blob in client.list_blobs(bucket_name, prefix=f"{prefix}/" if prefix else None):
            if blob.name.endswith("/") and blob.size == 0:
                # Only if still the marker we listed: a concurrent writer's object is left alone.
                try:
                    bucket.blob(blob.name).delete(if_generation_match=blob.generation)
                except (gexc.NotFound, gexc.PreconditionFailed):
                    continue
                removed.append(f"gs://{bucket_name}/{blob.name}")
    return removed


def main(parsed_argv) -> None:
    """Run one TFX executor; `parsed_argv` is what TFX's own flag parser returns
    (kubeflow_v2_run_executor._parse_flags), so the compiled arguments stay TFX's."""
    from absl import logging
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    args, beam_args = parsed_argv
    original = args.json_serialized_invocation_args
    args.json_serialized_invocation_args = repair_executor_input(
        original, getattr(args, "json_serialized_inputs_spec_args", None))
    tfx_entrypoint.main((args, beam_args))
    for name in remove_directory_markers(output_uris(original)):
        logging.info("removed GCS directory marker %s (kubeflow/pipelines#13476)", name)


if __name__ == "__main__":
    from absl import app
    from tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor import _parse_flags

    app.run(main, flags_parser=_parse_flags)
