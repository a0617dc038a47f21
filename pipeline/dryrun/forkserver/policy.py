"""When a task may be forked from the fork server, and when it must run as a fresh process (fail safe)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Optional

from components.gcs import MOUNT_ENV
from pipeline.dryrun.gcs_emulator import EMULATOR_ENV

# Variables a request may carry with another value than the server's, because they are read when used,
# not when a module is imported; with the modules that do read them at import (the server must not have
# loaded those). Checked by grepping site-packages for module-level reads. All else fails closed.
_AIPLATFORM_ENV = ("google.cloud.aiplatform.training_utils.environment_variables",)  # module constants
RUN_TIME_ENV: dict[str, tuple[str, ...]] = {
    # What workers.py sets per replica. CLUSTER_SPEC: trainer/strategy.py _tf_config and TFX's tuner
    # executor read it when called; TF_CONFIG (strategy.py sets it from CLUSTER_SPEC): TF's
    # TFConfigClusterResolver reads os.environ when it resolves.
    "CLUSTER_SPEC": (),
    "TF_CONFIG": (),
    # Each run's Vertex emulator (customjob.py) has its own port. gRPC's core reads it when it creates a
    # channel (http_proxy_mapper; grpc doc/environment_variables.md), tested in test_forkserver.py.
    "grpc_proxy": (),
    # The rest of each run's Vertex emulator: gRPC loads its default roots on a process's first TLS channel
    # (tested in test_forkserver.py); google.auth.default() reads the key's path when called
    # (google/auth/_default.py, _get_explicit_environ_credentials).
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": (),
    "GOOGLE_APPLICATION_CREDENTIALS": (),
    # Each dry run's fake-gcs-server and bucket mount (gcs_emulator.py): google-cloud-storage reads the host when
    # a Client is made (google/cloud/storage/_helpers.py, _get_storage_emulator_override), components/gcs.py
    # the mount when it maps a path (api_uri).
    EMULATOR_ENV: (),
    MOUNT_ENV: (),
    # A test's Pub/Sub stand-in: google-cloud-pubsub reads it when a PublisherClient is made
    # (google/cloud/pubsub_v1/publisher/client.py, Client.__init__), which the exit handler does when it notifies.
    "PUBSUB_EMULATOR_HOST": (),
    # pytest names the test phase running in its process (so in each task of a test's dry run); only functions
    # read it (google/genai/_replay_api_client.py _debug_print, ipykernel/iostream.py OutStream.__init__).
    "PYTEST_CURRENT_TEST": (),
    # What the tuning stand-in sets per trial (training/tuning.py): cloudml-hypertune reads both when a HyperTune
    # is made (hypertune/hypertune.py, HyperTune.__init__), which a trial does after training.
    "CLOUD_ML_HP_METRIC_FILE": (),
    "CLOUD_ML_TRIAL_ID": (),
    "AIP_MODEL_DIR": _AIPLATFORM_ENV,
    "AIP_CHECKPOINT_DIR": _AIPLATFORM_ENV,
    "AIP_TENSORBOARD_LOG_DIR": _AIPLATFORM_ENV,
}
# The one thread a preload may leave running besides the main one (fork_check says why it is safe).
FORK_SAFE_THREADS = ("jemalloc_bg_thd",)


def why_fresh(request: dict, start_env: dict[str, str], cwd: str, loaded) -> Optional[str]:
    """Why this request cannot be forked from a server started with `start_env` in `cwd`, None if it can."""
    argv = request["argv"]
    if len(argv) < 3 or argv[1] != "-m" or os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
        return "not `python -m module` with the server's interpreter"
    if os.path.realpath(request["cwd"]) != os.path.realpath(cwd):
        return f"its cwd {request['cwd']} is not the fork server's {cwd}"
    env = request["env"]
    differing = sorted(k for k in set(env) | set(start_env) if env.get(k) != start_env.get(k))
    unsafe = []
    for key in differing:
        if key not in RUN_TIME_ENV:
            unsafe.append(key)
        elif any(m in loaded for m in RUN_TIME_ENV[key]):
            unsafe.append(f"{key} (read at import by {', '.join(m for m in RUN_TIME_ENV[key] if m in loaded)})")
    if unsafe:
        return f"its environment differs from the fork server's in {', '.join(unsafe)}, which may be read at import"
    return None


def fork_check() -> Optional[str]:
    """Why forking from this process would not be safe (None: safe).

    After the preload: exactly one Python thread and TensorFlow's eager context not initialized (multi-worker
    and TPU set-up need an untouched runtime, trainer/strategy.py); after a probe fork, no OS thread but the
    main one and jemalloc's background thread. The threads a preload leaves (found with gdb, `thread apply all
    bt`): numpy's and scipy's OpenBLAS each start a `blas_thread_server` pool (scipy.linalg is imported by TF),
    pyarrow's bundled jemalloc starts `jemalloc_bg_thd` (src/background_thread.c). Both register
    pthread_atfork handlers: OpenBLAS's prepare handler `blas_thread_shutdown` joins its pool before every fork
    and the pool is recreated on the next BLAS call in either process (checked: after a fork the server has no
    OpenBLAS thread, a child's matmul starts one); jemalloc's prefork takes all its locks and its child handler
    resets the background-thread state, so the child starts without that thread. Neither leaves a lock held in
    the child. Any other thread fails the check: a new library that starts one turns the server off, not on.
    """
    python_threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if python_threads:
        return f"Python threads are running after the preload: {', '.join(python_threads)}"
    context = sys.modules.get("tensorflow.python.eager.context")
    if context is not None:
        ctx = context.context_safe()
        if ctx is not None and ctx._initialized:
            return "TensorFlow's eager context was initialized by the preload"
    # OpenBLAS stops its pool before a fork (its atfork handler); what is left must be known to be safe.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    others = []
    for tid in sorted(os.listdir("/proc/self/task")):
        if int(tid) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            if name not in FORK_SAFE_THREADS:
                others.append(f"{tid} ({name})")
    if others:
        return f"OS threads of unknown fork safety are running: {', '.join(others)}"
    return None
