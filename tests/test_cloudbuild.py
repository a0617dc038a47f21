"""infra/cloudbuild.yaml: substitutions resolved by Cloud Build's rules, the
compile step run exactly as the build runs it, and the spec it uploads checked
for placeholders and against the Terraform that creates the project."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.infra_support import (
    PINNED_IMAGE,
    REPO,
    TF_VARS,
    VERTEX_CONFIG,
    cloudbuild,
    interpolate,
    load_terraform,
    may_write,
    pipeline_bucket,
    resolve_substitutions,
    sa,
    steps,
    substitute,
)

COMMIT = "3f1c2ab9d0e4b5c6a7f8091a2b3c4d5e6f708192"
# What a trigger in the sample project (infra_support.TF_VARS) provides.
TRIGGER = {"PROJECT_ID": TF_VARS["project_id"], "COMMIT_SHA": COMMIT, "SHORT_SHA": COMMIT[:7],
           "BUILD_ID": "6f2b1c9e-0000-4000-8000-000000000001", "_REGION": TF_VARS["region"]}
MANUAL = {k: v for k, v in TRIGGER.items() if k not in ("COMMIT_SHA", "SHORT_SHA")}
BUILD_STEPS = {"build-pipeline-image": "infra/docker/Dockerfile", "build-tpu-image": "infra/docker/Dockerfile.tpu",
               "build-gpu-image": "infra/docker/Dockerfile.gpu"}


@pytest.fixture(scope="module")
def build() -> dict:
    return cloudbuild()


def resolved_args(build: dict, step: str, given: dict) -> list[str]:
    subs = resolve_substitutions(build, given)
    return [substitute(a, subs) for a in steps(build)[step]["args"]]


def vertex_yaml() -> dict:
    return yaml.safe_load(VERTEX_CONFIG.read_text())


def leaves(node: dict, prefix: str = ""):
    for key, value in node.items():
        if isinstance(value, dict):
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def test_cloudbuild_builds_tests_compiles_and_uploads(build):
    by_id = steps(build)
    assert set(BUILD_STEPS) | {"check-version", "test", "push-pipeline-image", "push-tpu-image", "push-gpu-image",
                                "compile", "upload-spec"} <= set(by_id)
    for step in build["steps"]:
        assert PINNED_IMAGE.match(step["name"]), f"step {step['id']} image {step['name']!r} is not pinned"
    for step, dockerfile in BUILD_STEPS.items():
        assert dockerfile in by_id[step]["args"]
        assert by_id[step]["waitFor"] == ["check-version"]
    assert "pytest" in by_id["test"]["args"]
    # The spec is compiled only after every image it may name was pushed.
    assert set(by_id["compile"]["waitFor"]) == {"push-pipeline-image", "push-tpu-image", "push-gpu-image"}
    assert len(build["images"]) == 3


def test_every_image_is_built_with_the_commit_as_code_version(build):
    for step in BUILD_STEPS:
        args = resolved_args(build, step, TRIGGER)
        assert args[args.index("--build-arg") + 1] == f"CODE_VERSION={COMMIT}", step


def test_image_tags_are_the_commit(build):
    """The repository's tags are immutable: a fixed default tag would be refused on the second build."""
    other = {**TRIGGER, "COMMIT_SHA": "0" * 40, "SHORT_SHA": "0" * 7}
    images = [resolve_substitutions(build, given) for given in (TRIGGER, other)]
    for name in ("_PIPELINE_IMAGE", "_TRAINER_IMAGE", "_GPU_IMAGE"):
        assert images[0][name].endswith(f":{COMMIT}") and images[1][name].endswith(":" + "0" * 40), name
    upload = resolved_args(build, "upload-spec", TRIGGER)[-1]
    assert upload.endswith(f"/specs/pipeline-{COMMIT}.json")


def check_version(build: dict, given: dict) -> subprocess.CompletedProcess:
    script = resolved_args(build, "check-version", given)
    assert script[0] == "-c" and steps(build)["check-version"]["entrypoint"] == "bash"
    return subprocess.run(["bash", "-c", script[1]], capture_output=True, text=True, timeout=30)


def test_a_build_without_a_commit_stops_at_once_with_the_fix(build):
    stopped = check_version(build, MANUAL)
    assert stopped.returncode == 1
    assert "--substitutions=_COMMIT_SHA=$(git rev-parse HEAD)" in stopped.stderr
    assert check_version(build, TRIGGER).returncode == 0
    assert check_version(build, {**MANUAL, "_COMMIT_SHA": COMMIT}).returncode == 0


@pytest.fixture(scope="module")
def compiled(build):
    """Run the compile step's command exactly: docker runs `python <args>` in the
    pipeline image with the checkout as working directory; here the same
    interpreter arguments run in this venv."""
    args = resolved_args(build, "compile", TRIGGER)
    entry = args.index("--entrypoint")
    assert args[entry + 1] == "python"
    python_args = args[entry + 3:]
    output = REPO / python_args[python_args.index("-o") + 1]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_USE_LEGACY_KERAS": "1"}
    result = subprocess.run([sys.executable, *python_args], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    text = output.read_text()
    output.unlink()
    return python_args, text


def test_every_project_specific_setting_is_overridden(build):
    """Each setting of configs/vertex.yaml that names the placeholder project or the default region."""
    config = vertex_yaml()
    placeholder, region = config["vertex"]["project"], config["vertex"]["region"]
    specific = {key for key, value in leaves(config) if isinstance(value, str)
                and (placeholder in value or region in value)}
    assert {"pipeline.root", "data.input_dir", "vertex.project", "vertex.service_account"} <= specific
    args = steps(build)["compile"]["args"]
    overridden = {args[i + 1].split("=", 1)[0] for i, a in enumerate(args) if a == "--set"}
    assert specific <= overridden, f"not set by the compile step: {sorted(specific - overridden)}"
    # Workers without public IPs need the Terraform subnetwork (Private Google Access).
    assert "dataflow.subnetwork" in overridden


def test_compiled_spec_has_no_placeholder_left(build, compiled):
    _, text = compiled
    config = vertex_yaml()
    for placeholder in (config["vertex"]["project"], config["vertex"]["region"]):
        assert placeholder not in text, f"{placeholder!r} is still in the spec compiled by Cloud Build"
    subs = resolve_substitutions(build, TRIGGER)
    # (The pipeline's own account is not in the spec: submit passes it to Vertex.)
    for name in ("_BUCKET", "_DATA_DIR", "_SCHEMA_FILE", "_TRAINING_SA", "_DATAFLOW_SA", "_SUBNETWORK",
                 "_PIPELINE_IMAGE", "_TRAINER_IMAGE"):
        assert subs[name] in text, f"{name}={subs[name]} is not in the spec"


def test_build_names_what_terraform_creates(build):
    tf, subs = load_terraform(), resolve_substitutions(build, TRIGGER)
    res = tf["resource"]
    assert subs["_NAME"] == tf["variable"]["name"]["default"]
    assert subs["_BUCKET"] == pipeline_bucket(tf)
    for sub, account in (("_PIPELINE_SA", "pipeline"), ("_TRAINING_SA", "training"), ("_DATAFLOW_SA", "dataflow")):
        account_id = interpolate(tf, res["google_service_account"][account]["account_id"], TF_VARS)
        assert subs[sub] == f"{account_id}@{TF_VARS['project_id']}.iam.gserviceaccount.com", sub
    subnet = interpolate(tf, res["google_compute_subnetwork"]["dataflow"]["name"], TF_VARS)
    assert subs["_SUBNETWORK"] == f"regions/{TF_VARS['region']}/subnetworks/{subnet}"
    repository = interpolate(tf, res["google_artifact_registry_repository"]["images"]["repository_id"], TF_VARS)
    assert subs["_IMAGES"] == f"{TF_VARS['region']}-docker.pkg.dev/{TF_VARS['project_id']}/{repository}"
    # The build account may write where the spec is uploaded.
    destination = resolved_args(build, "upload-spec", TRIGGER)[-1]
    assert destination.startswith(f"gs://{pipeline_bucket(tf)}/")
    assert may_write(tf, sa("build"), destination.split("/", 3)[3])


def object_name(tf: dict, uri: str) -> str:
    prefix = f"gs://{pipeline_bucket(tf)}/"
    assert uri.startswith(prefix), uri
    return uri[len(prefix):]


def test_compiled_spec_writes_where_terraform_lets_each_account_write(compiled):
    """The Dataflow temp files, the pipeline root and the serving directory of a
    real spec, against the IAM conditions in infra/terraform."""
    tf = load_terraform()
    _, text = compiled
    spec = json.loads(text)
    root = object_name(tf, spec["runtimeConfig"]["gcsOutputDirectory"])
    [temp] = set(re.findall(r"--temp_location=(gs://[^\"\\\s]+)", text))
    [serving] = {u for u in re.findall(r"gs://[^\"\\\s]+", text) if "/serving_model/" in u}
    output = f"{root}/Trainer/model/7/Format-Serving/saved_model.pb"
    assert may_write(tf, sa("training"), output) and may_write(tf, sa("dataflow"), output)
    assert may_write(tf, sa("dataflow"), f"{object_name(tf, temp)}/beam-temp-1/part-0")
    pushed = f"{object_name(tf, serving)}/1700000000/saved_model.pb"
    assert may_write(tf, sa("pipeline"), pushed)
    assert not may_write(tf, sa("training"), pushed) and not may_write(tf, sa("dataflow"), pushed)
