"""Run alone (`python -I serving_probe.py MODEL REQUESTS BOUND_MS OUT`): can TensorFlow by itself serve this SavedModel?
Imports TensorFlow and the standard library only, as TF Serving links core TF ops only (docs/serving.md)."""

import json
import sys
import time

# Packages a TF Serving binary does not have: loading the model must not need them, so the probe checks
# that nothing imported any of them (the interpreter runs isolated, -I, so our own code is not importable).
NOT_IN_TF_SERVING = ("tfx", "tensorflow_transform", "tensorflow_model_analysis", "tensorflow_data_validation",
                     "tensorflow_text", "tensorflow_decision_forests", "tensorflow_serving", "components",
                     "pipeline", "trainer")
SIGNATURE, TAG = "serving_default", "serve"


def graph_ops(saved) -> dict:
    """{op name: where it is used} over every meta graph's nodes and every function in their libraries."""
    ops = {}
    for meta in saved.meta_graphs:
        for node in meta.graph_def.node:
            ops.setdefault(node.op, f"graph node {node.name}")
        for function in meta.graph_def.library.function:
            for node in function.node_def:
                ops.setdefault(node.op, f"function {function.signature.name}, node {node.name}")
    return ops


def declared_outputs(saved) -> dict:
    for meta in saved.meta_graphs:
        if TAG in meta.meta_info_def.tags and SIGNATURE in meta.signature_def:
            return {key: (info.dtype, [d.size for d in info.tensor_shape.dim], info.tensor_shape.unknown_rank)
                    for key, info in meta.signature_def[SIGNATURE].outputs.items()}
    return None


def read_requests(tf, path: str) -> list:
    """The requests as {input key: tensor}: records of NamedTensorProto, each request ended by an empty name."""
    from tensorflow.core.protobuf import named_tensor_pb2

    out, current = [], {}
    for record in tf.data.TFRecordDataset([path]):
        named = named_tensor_pb2.NamedTensorProto.FromString(record.numpy())
        if not named.name:
            out.append(current)
            current = {}
        else:
            current[named.name] = tf.make_ndarray(named.tensor)
    return out


def mismatch(tf, outputs: dict, declared: dict, batch: int) -> str:
    if set(outputs) != set(declared):
        return f"{SIGNATURE} answered {sorted(outputs)}, but declares {sorted(declared)}"
    for key, value in outputs.items():
        dtype, dims, unknown_rank = declared[key]
        if value.dtype.as_datatype_enum != dtype:
            return f"output {key!r} is {value.dtype.name}, but {SIGNATURE} declares {tf.dtypes.as_dtype(dtype).name}"
        shape = value.shape.as_list()
        if not unknown_rank and (len(shape) != len(dims) or any(d not in (-1, s) for d, s in zip(dims, shape))):
            return f"output {key!r} has shape {shape}, but {SIGNATURE} declares {dims} (-1: any)"
        if shape and shape[0] != batch:
            return f"output {key!r} answers {shape[0]} rows for a request of {batch}"
    return ""


def probe(model_dir: str, requests_path: str, bound_ms: float) -> dict:
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    result = {"ok": False, "reason": "", "ops": 0, "latency_ms": []}
    saved = saved_model_pb2.SavedModel.FromString(tf.io.gfile.GFile(f"{model_dir}/saved_model.pb", "rb").read())
    ops = graph_ops(saved)
    result["ops"] = len(ops)
    missing = sorted(op for op in ops if op_def_registry.get(op) is None)
    if missing:
        result["reason"] = ("ops not registered in core TensorFlow (TF Serving would not load the model): " +
                            "; ".join(f"{op} ({ops[op]})" for op in missing))
        return result
    declared = declared_outputs(saved)
    if declared is None:
        result["reason"] = f"no {SIGNATURE} signature in a meta graph tagged {TAG!r}"
        return result
    try:
        function = tf.saved_model.load(model_dir, tags=[TAG]).signatures[SIGNATURE]
    except Exception as e:  # what TF says is the reason; the probe reports it rather than crashing
        result["reason"] = f"TensorFlow alone cannot load the model: {type(e).__name__}: {e}"
        return result
    requests = read_requests(tf, requests_path)
    if not requests:
        result["reason"] = "no warm-up requests to answer"
        return result
    for timed in (False, True):  # the first pass pays TF's lazy initialisation, as TF Serving's warm-up does
        for request in requests:
            started = time.perf_counter()
            try:
                outputs = function(**{k: tf.constant(v) for k, v in request.items()})
            except Exception as e:
                result["reason"] = f"{SIGNATURE} failed on a warm-up request: {type(e).__name__}: {e}"
                return result
            elapsed = (time.perf_counter() - started) * 1000
            wrong = mismatch(tf, outputs, declared, len(next(iter(request.values()))))
            if wrong:
                result["reason"] = wrong
                return result
            if timed:
                result["latency_ms"].append(round(elapsed, 3))
    slowest = max(result["latency_ms"])
    if slowest > bound_ms:
        result["reason"] = f"the slowest warm-up request took {slowest:.1f} ms, over the bound of {bound_ms:g} ms"
        return result
    imported = sorted({m.split(".")[0] for m in sys.modules} & set(NOT_IN_TF_SERVING))
    if imported:
        result["reason"] = f"serving the model imported {', '.join(imported)}, which TF Serving does not have"
        return result
    result["ok"] = True
    return result


def main(argv: list) -> int:
    model_dir, requests_path, bound_ms, out = argv[1], argv[2], float(argv[3]), argv[4]
    result = probe(model_dir, requests_path, bound_ms)
    with open(out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
