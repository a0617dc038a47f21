"""`python -m pipeline.kubeflow.entrypoint`: TFX's v2 container entrypoint
(tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor), made to run under the
open-source KFP launcher. The kubeflow compile (compile.py) makes it every task's command;
the arguments are TFX's own.

What the open-source backend hands the executor differs from Vertex in two ways that break
TFX 1.16 (tensorflow/tfx#7768, reported with TFX 1.16 and kfp 2.5; still open):

1. Input artifacts arrive without their type. The driver reads an upstream output back from
   ML Metadata as `metadata.OutputArtifact{Schema: ""}` ("TODO(Bobgy): figure out how to get
   schema", kubeflow/pipelines backend/src/v2/metadata/client.go,
   GetOutputArtifactsByExecutionId), and `OutputArtifact.ToRuntimeArtifact` sets
   `type: {instanceSchema: ""}` from it (same file); backend/src/v2/driver/resolve.go
   (resolveUpstreamArtifacts) passes that on as the executor's input. TFX then reads the class
   from the schema's title (kubeflow_v2_entrypoint_utils.py, _retrieve_class_path):
   `yaml.safe_load("")` is None and `.get('title')` raises AttributeError; a
   `schemaTitle: system.*` type would be imported as the class path `system.Artifact` and fail.
   Here such an input takes the type its component declares, which TFX's compiler passes in
   --json_serialized_inputs_spec_args (step_builder.py, _build_container_spec; pipeline spec
   2.1); an input the component does not declare is an error naming it.
2. The launcher adds an output of its own: `executor-logs`, `schemaTitle: system.Artifact`,
   whenever logs are published (the default, --publish_logs=true: backend/src/v2/driver/
   driver.go, provisionOutputs; backend/src/v2/cmd/driver/main.go). The launcher writes and
   uploads it itself and ignores what the executor says about it
   (backend/src/v2/component/launcher_v2.go, getLogWriter, uploadOutputArtifacts), so it is
   taken out of what TFX sees. Any other `system.*` or untyped output is an error.

And one in what TFX leaves behind (kubeflow/pipelines#13476, open; reproduced there with
tf.saved_model.save to a gs:// artifact URI): TensorFlow's GCS file system (tf.io.gfile, which
TFX's fileio and every TF writer use) leaves a zero-byte object named `dir/` for directories it
creates. (Not reproduced here: TF's GCS file system cannot be pointed at a local fake-gcs-server;
the tests plant such objects with google-cloud-storage.) The launcher
downloads every object under an input artifact's URI to a local file
(backend/src/v2/objectstore/object_store.go, DownloadBlob and downloadFile), so `dir/` becomes
a file named `dir` and the next object under it fails with "mkdir ...: not a directory" in
every task downstream. After the executor has run, the markers under this task's output
artifacts are deleted (remove_directory_markers); nothing else reads them: GCS has no
directories, and tf.io.gfile finds a directory by its objects' prefix too.
"""

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
