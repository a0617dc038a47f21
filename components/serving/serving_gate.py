"""The serving-compatibility gate: the candidate, with its warm-up file, loaded and asked in a fresh TensorFlow-only
process before the push (components/serving/serving_probe.py). Why and sources: docs/serving.md."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
from typing import Optional

from components.serving import prediction_image, warmup
from components.splits import EVAL

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_probe.py")


@dataclasses.dataclass(frozen=True)
class GateSettings:
    """What the Pusher needs of the `serving` section (pipeline/sections/serving.py builds it; JSON between them)."""
    model_name: str                  # the name TF Serving serves the model under (pipeline.name)
    warmup_requests: int = 8         # eval rows, one request each
    max_latency_ms: float = 1000.0   # the slowest replayed request's bound, after one untimed pass
    timeout_seconds: float = 300.0   # the probe process as a whole
    drop_features: tuple[str, ...] = ()  # what clients don't send: the label, ignored columns
    split: str = EVAL  # warm-up rows come from eval: the test split stays the Evaluator's alone
    rollout: str = "direct"          # direct | canary (components/serving/rollout.py)
    model_config_poll_seconds: float = 0.0  # rollout.Reload: the poll of the servers reading models.config
    # components/serving/vertex_endpoint.py Target's fields; None: TF Serving only
    vertex_endpoint: Optional[dict] = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "GateSettings":
        body = json.loads(text)
        body["drop_features"] = tuple(body.get("drop_features") or ())
        return cls(**body)


@dataclasses.dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""                  # why it can't serve; "" when ok
    latency_ms: tuple[float, ...] = ()
    ops: int = 0
    note: str = ""                    # what the gate did not check

    def describe(self) -> str:
        if not self.ok:
            return f"refused: {self.reason}"
        return (f"serves: {self.ops} op types all in core TensorFlow, {len(self.latency_ms)} warm-up requests "
                f"answered, slowest {max(self.latency_ms):.1f} ms" + (f"; {self.note}" if self.note else ""))


def add_warmup(model_dir: str, examples_uri: str, settings: GateSettings) -> str:
    """Write the warm-up file into model_dir (a copy of the candidate) from the real rows of examples_uri."""
    rows = warmup.eval_rows(examples_uri, settings.split, settings.warmup_requests, settings.drop_features)
    logs = warmup.requests(rows, settings.model_name, warmup.input_key(model_dir))
    return warmup.write(model_dir, logs)


def _requests_file(model_dir: str, path: str) -> None:
    """The warm-up file's PredictRequests as TF-only records (NamedTensorProto, an empty name ends a request):
    the probe must not import tensorflow-serving-api's protos, which TF Serving compiles in but TF lacks."""
    import tensorflow as tf
    from tensorflow.core.protobuf import named_tensor_pb2

    with tf.io.TFRecordWriter(path) as writer:
        for log in warmup.read(model_dir):
            for key, tensor in sorted(log.predict_log.request.inputs.items()):
                writer.write(named_tensor_pb2.NamedTensorProto(name=key, tensor=tensor).SerializeToString())
            writer.write(named_tensor_pb2.NamedTensorProto().SerializeToString())


def check(model_dir: str, settings: GateSettings) -> Verdict:
    """Can TF Serving load model_dir and answer its warm-up requests? Asked of a fresh, isolated interpreter, under
    this environment's TensorFlow: a Vertex endpoint whose image runs an older one is refused (fail closed) unless
    its config accepts that, and then the verdict says it was not checked."""
    endpoint = settings.vertex_endpoint or {}
    older = prediction_image.older_than_exporter(endpoint["image_uri"]) if endpoint else ""
    if older and not endpoint.get("accept_older_image_tf"):
        return Verdict(False, f"{older} (serving.vertex_endpoint.accept_older_image_tf is false)")
    verdict = _probe(model_dir, settings)
    if older and verdict.ok:
        verdict = dataclasses.replace(verdict, note=f"the endpoint's image was not checked: {older}; pushed as "
                                                    "serving.vertex_endpoint.accept_older_image_tf says")
    logging.info("serving gate: %s", verdict.describe())
    return verdict


def _probe(model_dir: str, settings: GateSettings) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="serving-gate-") as work:
        requests, out = os.path.join(work, "requests.tfrecord"), os.path.join(work, "verdict.json")
        _requests_file(model_dir, requests)
        # -I: no PYTHONPATH, no user site, not the script's directory: nothing of ours is importable.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        try:
            done = subprocess.run([sys.executable, "-I", PROBE, model_dir, requests, str(settings.max_latency_ms), out],
                                  env=env, capture_output=True, text=True, timeout=settings.timeout_seconds)
        except subprocess.TimeoutExpired:
            return Verdict(False, f"the TensorFlow-only probe did not finish within {settings.timeout_seconds:g} s")
        body = _read(out)
        if body is None:
            tail = (done.stderr or "").strip().splitlines()[-3:]
            return Verdict(False, f"the TensorFlow-only probe exited {done.returncode} without a verdict: "
                                  + " | ".join(tail))
    return Verdict(bool(body["ok"]), body.get("reason", ""), tuple(body.get("latency_ms") or ()),
                   int(body.get("ops", 0)))


def _read(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
