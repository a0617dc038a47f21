"""infra/docker: the pipeline image and its TPU and GPU trainer variants follow
requirements.lock, and the build-time checks in them tell the builds apart."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra_support import DOCKER, PINNED_IMAGE, docker_arg, dockerfile, lock_version, tpu_library_path

IMAGES = ["Dockerfile", "Dockerfile.tpu", "Dockerfile.gpu"]


def run_lines(text: str) -> list[str]:
    """Each RUN instruction as the shell receives it (continuation lines joined)."""
    return [line[len("RUN "):] for line in re.sub(r"\\\n", "", text).splitlines() if line.startswith("RUN ")]


def run_with(text: str, needle: str) -> str:
    [line] = [line for line in run_lines(text) if needle in line]
    return line


def build_check(text: str, needle: str) -> str:
    """The `python -c "..."` that follows the install in the RUN containing `needle`."""
    found = re.search(r'&& (python -c ".*")$', run_with(text, needle))
    assert found, f"no python check after {needle}"
    return found[1]


def env_names(text: str) -> set[str]:
    joined = re.sub(r"\\\n", " ", text)
    return {name for line in joined.splitlines() if line.startswith("ENV ")
            for name in re.findall(r"(\w+)=", line[len("ENV "):])}


@pytest.mark.parametrize("name", IMAGES)
def test_dockerfiles_pin_the_base_and_install_from_the_lock(name):
    text = dockerfile(name)
    bases = re.findall(r"^FROM\s+(\S+)", text, flags=re.M)
    assert bases
    for base in bases:
        assert PINNED_IMAGE.match(base), f"{name}: base image {base!r} is not pinned by tag or digest"
    assert re.search(r"python:3\.10\.", text), "TFX 1.16 needs Python 3.10"
    assert re.search(r"^COPY requirements\.lock ", text, flags=re.M)
    assert "pip install -r requirements.lock" in run_lines(text)
    # The project itself must not pull in unpinned dependencies, and the result must be consistent.
    assert re.search(r"pip install --no-deps \.", text)
    assert run_lines(text)[-1].endswith("&& pip check"), f"{name}: the last RUN must end with pip check"
    assert (DOCKER / f"{name}.dockerignore").is_file()


@pytest.mark.parametrize("name", IMAGES)
def test_images_record_the_code_version(name):
    """Lineage reads PIPELINE_CODE_VERSION (the image has no git); set last so a new
    commit does not rebuild the dependency layers."""
    text = dockerfile(name)
    assert re.search(r"^ARG CODE_VERSION=$", text, flags=re.M)
    env = re.search(r"^ENV PIPELINE_CODE_VERSION=\$\{CODE_VERSION\}$", text, flags=re.M)
    assert env, f"{name}: ENV PIPELINE_CODE_VERSION=${{CODE_VERSION}} missing"
    last_run = max(m.start() for m in re.finditer(r"^RUN ", text, flags=re.M))
    assert env.start() > last_run, f"{name}: the code version must come after every RUN"


def test_tpu_image_installs_the_tpu_build_of_the_locks_tensorflow():
    text = dockerfile("Dockerfile.tpu")
    tf_version = lock_version("tensorflow")
    assert docker_arg(text, "TF_VERSION") == tf_version, "tensorflow-tpu must be the lock's TF patch release"
    install = run_with(text, "tensorflow-tpu==")
    assert '"tensorflow-tpu==${TF_VERSION}"' in install and "--no-deps" in install
    # tensorflow-tpu pins one libtpu, published on Google's index for TF TPU wheels.
    assert re.fullmatch(r"\d+\.\d+\.\d+(rc\d+)?", docker_arg(text, "LIBTPU_VERSION"))
    assert '"libtpu==${LIBTPU_VERSION}"' in install
    assert "-f https://storage.googleapis.com/libtpu-tf-releases/index.html" in install
    # Uninstalling tensorflow leaves tfx, TFT, TFDV, TFMA, tfx-bsl, tf-keras and
    # tensorflow-serving-api with a missing requirement.
    assert "pip uninstall" not in text


def test_tpu_image_puts_libtpu_where_both_tpu_runtimes_find_it():
    text = dockerfile("Dockerfile.tpu")
    link = run_with(text, "libtpu.so")
    # Vertex asks v5e TF images for /lib/libtpu.so; the StreamExecutor runtime dlopens it from /lib too.
    assert tpu_library_path() == "/lib/libtpu.so"
    assert 'test -f "$libtpu"' in link
    # The runtime is chosen per job: v5e's job spec sets PJRT, v2/v3 must not inherit it.
    assert not {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "NEXT_PLUGGABLE_DEVICE_USE_C_API"} & env_names(text)
    assert "TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so" in text  # what the v5e job spec must set


@pytest.fixture(scope="module")
def this_tensorflow_runs():
    """The build checks run here, against this venv's TensorFlow (the CPU/CUDA build of the lock's version)."""
    def run(command: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "TF_VERSION": lock_version("tensorflow"), "TF_CPP_MIN_LOG_LEVEL": "3",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        return subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=300)
    return run


def test_tpu_image_check_rejects_the_standard_tensorflow_build(this_tensorflow_runs):
    """If the CPU wheel's files won over the TPU wheel's, the image build stops."""
    result = this_tensorflow_runs(build_check(dockerfile("Dockerfile.tpu"), "tensorflow-tpu=="))
    assert result.returncode != 0 and "not the TPU build" in result.stderr, result.stderr[-2000:]


def test_gpu_image_adds_tensorflows_own_cuda_pins(this_tensorflow_runs):
    text = dockerfile("Dockerfile.gpu")
    assert docker_arg(text, "TF_VERSION") == lock_version("tensorflow")
    install = run_with(text, "and-cuda")
    # The extra brings TF's exact nvidia-* pins; the lock as constraints keeps everything else.
    assert install.startswith('pip install -c requirements.lock "tensorflow[and-cuda]==${TF_VERSION}"')
    # The standard Linux wheel is a CUDA build: the check passes for it, and would stop a CPU-only one.
    result = this_tensorflow_runs(build_check(text, "and-cuda"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "info['is_cuda_build']" in build_check(text, "and-cuda")
    env = re.sub(r"\\\n", " ", text)
    assert re.search(r"LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64", env)
    assert re.search(r"PATH=/usr/local/lib/python3\.10/site-packages/nvidia/cuda_nvcc/bin:\$PATH", env)


def test_pipeline_image_serves_as_dataflow_sdk_container():
    text = dockerfile("Dockerfile")
    assert f"FROM apache/beam_python3.10_sdk:{lock_version('apache-beam')} AS beam" in text
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in text
