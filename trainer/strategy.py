"""Pick and set up the tf.distribute strategy; must run before any other TF op. Why: docs/internals.md."""

from __future__ import annotations

import json
import logging
import os
import tempfile

import tensorflow as tf

from trainer import pod
from trainer.errors import StrategyError

log = logging.getLogger(__name__)

# Vertex AI names its worker pools workerpool0..3; TF_CONFIG wants task types.
_VERTEX_POOL_TO_TASK = {"workerpool0": "chief", "workerpool1": "worker",
                        "workerpool2": "ps", "workerpool3": "evaluator"}


def tf_config_from_vertex(cluster_spec_json: str) -> dict:
    """Translate Vertex AI's CLUSTER_SPEC into the TF_CONFIG TF expects."""
    spec = json.loads(cluster_spec_json)
    cluster = {_VERTEX_POOL_TO_TASK[pool]: hosts for pool, hosts in spec["cluster"].items() if hosts}
    task = spec["task"]
    return {"cluster": cluster, "task": {"type": _VERTEX_POOL_TO_TASK[task["type"]], "index": task["index"]}}


def _tf_config() -> dict | None:
    """TF_CONFIG as a dict, filled from Vertex's CLUSTER_SPEC when only that is set."""
    raw = os.environ.get("TF_CONFIG")
    if not raw and os.environ.get("CLUSTER_SPEC"):
        try:
            config = tf_config_from_vertex(os.environ["CLUSTER_SPEC"])
        except (ValueError, KeyError, TypeError) as e:
            raise StrategyError(f"CLUSTER_SPEC set by Vertex AI does not parse: {type(e).__name__}: {e}") from None
        os.environ["TF_CONFIG"] = json.dumps(config)
        return config
    if not raw:
        return None
    try:
        config = json.loads(raw)
        _check_tf_config(config)
    except ValueError as e:
        raise StrategyError(f"TF_CONFIG does not parse ({e}): {raw[:200]!r}") from None
    return config


def _check_tf_config(config) -> None:
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict) \
            or not isinstance(config.get("task"), dict):
        raise ValueError("needs a 'cluster' mapping and a 'task' mapping")
    task_type, index = config["task"].get("type"), config["task"].get("index")
    hosts = config["cluster"].get(task_type)
    if not isinstance(hosts, list) or not isinstance(index, int) or not 0 <= index < len(hosts):
        raise ValueError(f"task {task_type!r} index {index!r} is not in the cluster")


def _tpu_attached() -> bool:
    # A TPU VM exposes its chips as /dev/accel*, Vertex and GKE set TPU env vars;
    # listing TPU devices would need the (slow, stateful) TPU system init.
    return (os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio/0")
            or bool(os.environ.get("TPU_NAME")) or bool(os.environ.get("TPU_ACCELERATOR_TYPE")))


def tpu_resolver(tpu: str) -> tf.distribute.cluster_resolver.TPUClusterResolver:
    """The resolver for trainer.tpu, not yet connected. `local`: this VM's chips, an empty cluster spec
    (one host). Otherwise a pod: one `worker` task per host, which this process, the only client, drives
    (tensorflow/python/distribute/cluster_resolver/tpu/tpu_cluster_resolver.py, cluster_spec)."""
    if pod.is_remote(tpu):
        problem = pod.client_problem()
        if problem:
            raise StrategyError(f"trainer.tpu={tpu!r}: {problem}")
    target = pod.target(tpu)
    try:
        return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target)
    except (ValueError, RuntimeError, OSError) as e:
        raise StrategyError(f"trainer.strategy=tpu: could not resolve TPU {target!r} (trainer.tpu): {e}") from e


def _make_tpu(tpu: str) -> tf.distribute.TPUStrategy:
    if tpu == pod.LOCAL and not _tpu_attached():
        raise StrategyError("trainer.strategy=tpu but no TPU is attached to this machine "
                            "(no /dev/accel*, TPU_NAME or TPU_ACCELERATOR_TYPE); "
                            "set trainer.tpu to a TPU name or address, or pick another strategy")
    problem = pod.local_slice_problem() if tpu == pod.LOCAL else None
    if problem:
        raise StrategyError(problem)
    resolver = tpu_resolver(tpu)
    if pod.is_remote(tpu):
        hosts = resolver.cluster_spec().as_dict().get(resolver.task_type, [])
        log.info("TPU pod client: %d hosts (%s)", len(hosts), ", ".join(hosts))
    try:
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as e:
        raise StrategyError(f"trainer.strategy=tpu: could not reach TPU {tpu!r} (trainer.tpu): {e}") from e
    return tf.distribute.TPUStrategy(resolver)


def require_accelerator(required: str | None, tpu: str = pod.LOCAL) -> None:
    """Fail fast, before any training, when the accelerator the job was configured
    for is absent: a GPU job in an image without CUDA would otherwise train on CPU.
    A pod's TPU is remote: connecting to it (in _make_tpu) is its check."""
    if required == "gpu":
        if not tf.config.list_physical_devices("GPU"):
            _refuse("trainer.require_accelerator=gpu but TensorFlow sees no GPU: the machine has none or the "
                    "image lacks TensorFlow's CUDA libraries (the gpu preset needs vertex.gpu_image, built "
                    "from infra/docker/Dockerfile.gpu); not training on CPU")
    elif required == "tpu":
        if not _tpu_attached() and not pod.is_remote(tpu):
            _refuse("trainer.require_accelerator=tpu but no TPU is attached to this machine "
                    "(no /dev/accel*, TPU_NAME or TPU_ACCELERATOR_TYPE); not training on CPU")
    elif required is not None:
        raise StrategyError(f"trainer.require_accelerator={required!r}: expected tpu, gpu or empty")


def _refuse(message: str) -> None:
    log.error(message)
    raise StrategyError(message)


def make_strategy(kind: str, tpu: str = "local", required_accelerator: str | None = None) -> tf.distribute.Strategy:
    """`kind` is trainer.strategy: auto | tpu | mirrored | multi_worker | default;
    `required_accelerator` is trainer.require_accelerator."""
    require_accelerator(required_accelerator, tpu)
    if kind == "auto":
        cluster = (_tf_config() or {}).get("cluster", {})
        if _tpu_attached() or pod.is_remote(tpu):
            kind = "tpu"
        elif len(cluster.get("chief", [])) + len(cluster.get("worker", [])) > 1:
            kind = "multi_worker"
        elif len(tf.config.list_physical_devices("GPU")) > 1:
            kind = "mirrored"
        else:
            kind = "default"
    log.info("distribution strategy: %s", kind)
    if kind == "tpu":
        return _make_tpu(tpu)
    if kind == "multi_worker":
        if _tf_config() is None:
            raise StrategyError("trainer.strategy=multi_worker needs TF_CONFIG (or Vertex's CLUSTER_SPEC)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy()
    if kind == "default":
        return tf.distribute.get_strategy()
    raise StrategyError(f"trainer.strategy={kind!r}: expected auto, tpu, mirrored, multi_worker or default")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Only the chief exports and writes summaries; others write to temp dirs. Under TPUStrategy this
    process is the only client, on a pod too (the other hosts run no trainer), so it is the chief."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in (None, "chief"):
        return True
    # Without a chief, worker 0 plays that role.
    return task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()


def chief_or_temp_dir(strategy: tf.distribute.Strategy, directory: str, purpose: str) -> str:
    """`directory` on the chief; a fresh temp dir on other workers.

    Saving is a collective under MultiWorkerMirroredStrategy, so every worker
    must write, but only the chief's files may land where others read them.
    """
    return directory if is_chief(strategy) else tempfile.mkdtemp(prefix=f"{purpose}-worker-")


def precision_policy(strategy: tf.distribute.Strategy, requested: str) -> str:
    """bfloat16 on TPU (no loss scaling needed), float16 on GPU, float32 on CPU."""
    if requested != "auto":
        return requested
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "mixed_bfloat16"
    if tf.config.list_physical_devices("GPU"):
        return "mixed_float16"
    return "float32"
