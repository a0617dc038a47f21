"""The training loop under real strategies, through `python -m trainer train`.

Its own process where a test needs one: logical CPU devices, TF_CONFIG and
XLA_FLAGS must be set before TF initialises, and preemption is a signal to a
process. Jobs that need none of these run the same entry point in this
process (`train_here`), saving a TensorFlow start-up each.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from trainer import cli
from trainer.cli import EXIT_BAD_CONFIG, EXIT_OK, EXIT_PREEMPTED

REPO = Path(__file__).resolve().parent.parent

# The same global batch split over replicas or micro-batches sums the same
# per-example gradients in a different order: float32 rounding only.
TRAJECTORY_RTOL = 1e-4


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    from trainer import synthetic

    root = tmp_path_factory.mktemp("data")
    return {"train_files": synthetic.write_examples(str(root / "train"), 1024, shards=2, seed=0),
            "eval_files": synthetic.write_examples(str(root / "eval"), 256, shards=2, seed=1)}


def write_job(directory: Path, data: dict, job_keys: dict | None = None, **trainer) -> Path:
    """A job config in `directory`: small defaults, `trainer` settings and other job keys overridden."""
    directory.mkdir(parents=True, exist_ok=True)
    job = {"trainer": {"strategy": "default", "train_steps": 40, "global_batch_size": 32,
                       "steps_per_execution": 10, "eval_every_steps": 10, "checkpoint_every_steps": 20,
                       "scale_lr_with_replicas": False, **trainer},
           **data,
           "checkpoint_dir": str(directory / "checkpoints"),
           "export_dir": str(directory / "export"),
           "result_file": str(directory / "result.json"),
           **(job_keys or {})}
    path = directory / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def start(job: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    full_env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC")}
    full_env.update(TF_USE_LEGACY_KERAS="1", PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    # A file, not a pipe: nobody reads a pipe while the test waits, and a full one blocks the trainer.
    log = open(job.parent / "train.log", "a")
    proc = subprocess.Popen([sys.executable, "-m", "trainer", "train", str(job), *args], env=full_env,
                            stdout=log, stderr=subprocess.STDOUT)
    log.close()
    proc.log_path = Path(log.name)
    return proc


def train_here(job: Path) -> None:
    """`python -m trainer train job` in this process (default strategy, this process's one CPU device)."""
    assert cli.main(["train", str(job)]) == EXIT_OK


def finish(proc: subprocess.Popen, expect: int = 0, timeout: float = 240) -> str:
    proc.wait(timeout=timeout)
    out = proc.log_path.read_text()
    assert proc.returncode == expect, f"exit {proc.returncode}, expected {expect}:\n{out[-4000:]}"
    return out


def result(job: Path) -> dict:
    return json.loads(Path(yaml.safe_load(job.read_text())["result_file"]).read_text())


def trajectory(res: dict) -> list[float]:
    return [r[key] for r in res["history"] for key in ("loss", "eval_loss")]


@pytest.fixture(scope="module")
def single_device_run(data, tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("default")
    job = write_job(directory, data, {"logdir": str(directory / "logs")}, profile_steps=[10, 20])
    train_here(job)
    res = result(job)
    res["logdir"] = str(directory / "logs")
    assert res["replicas"] == 1
    losses = trajectory(res)
    assert losses[-1] < 0.5 * losses[0], f"training did not learn: {losses}"
    return res


def test_tensorboard_scalars_and_profile_window_are_written(single_device_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = Path(single_device_run["logdir"])
    events = EventAccumulator(str(logdir), size_guidance={"tensors": 0}).Reload()
    tags = set(events.Tags()["tensors"])
    assert {"loss", "accuracy", "learning_rate", "examples_per_second", "eval_loss", "eval_accuracy"} <= tags
    assert [e.step for e in events.Tensors("loss")] == [10, 20, 30, 40]
    assert list((logdir / "plugins" / "profile").glob("*/*.xplane.pb")), "no profiler trace for steps [10, 20)"


def test_early_stopping_stops_and_stays_stopped(data, tmp_path):
    job = write_job(tmp_path, data, train_steps=400, learning_rate=0.05, early_stopping_patience=2)
    train_here(job)
    stopped = result(job)
    eval_losses = [r["eval_loss"] for r in stopped["history"]]
    assert stopped["stopped_early"] and stopped["step"] < 400
    assert min(eval_losses[-2:]) >= min(eval_losses[:-2])  # two evaluations without improvement
    train_here(job)  # a restart (e.g. after preemption) must not train on
    again = result(job)
    assert again["stopped_early"] and again["initial_step"] == again["step"] == stopped["step"]


def test_the_pass_budget_plans_from_the_rows_lowers_the_rate_on_a_plateau_and_stops_early(data, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from trainer import budget

    # The budget keys empty: planned from the 1,024 training rows (trainer/budget.py).
    job = write_job(tmp_path, data, {"logdir": str(tmp_path / "logs")}, train_steps=None, global_batch_size=None,
                    eval_every_steps=None, checkpoint_every_steps=None)
    train_here(job)
    res = result(job)
    plan = res["budget"]
    # A batch of 32 (sqrt(1024)), 32 steps a pass, 63 passes so the budget holds MIN_STEPS, an evaluation every
    # 2 passes (at most MAX_EVALS in the budget).
    assert (plan["by_passes"], plan["rows"], plan["global_batch_size"], plan["max_steps"],
            plan["eval_every_steps"]) == (True, 1024, 32, 2016, 64)
    steps = [r["step"] for r in res["history"]]
    assert steps == list(range(64, res["step"] + 1, 64))
    assert res["stop"] == plan["stop"] == "early" and res["step"] < plan["max_steps"] and res["stopped_early"]
    losses = [r["eval_loss"] for r in res["history"]]
    assert min(losses[-budget.PATIENCE:]) >= min(losses[:-budget.PATIENCE])  # PATIENCE evaluations, no lower loss
    # The rate: a linear warm-up over the first pass to 0.01, then halved each time eval loss went DECAY_AFTER
    # evaluations without a new low (the halvings the evaluations before the last host call decided).
    events = EventAccumulator(str(tmp_path / "logs"), size_guidance={"tensors": 0}).Reload()
    rates = {e.step: float(tf_value(e)) for e in events.Tensors("learning_rate")}
    halvings, stalled, best = 0, 0, float("inf")
    for loss in losses[:-1]:
        stalled = 0 if loss < best else stalled + 1
        best = min(best, loss)
        halvings += stalled > 0 and stalled % budget.DECAY_AFTER == 0
    assert halvings >= 1 and rates[res["step"]] == pytest.approx(0.01 * budget.DECAY_FACTOR ** halvings)
    assert rates[10] == pytest.approx(0.01 * 10 / 32)  # step 10 of a 32-step warm-up
    train_here(job)  # a restart stays stopped: the counters and the rate's factor are in the checkpoint
    again = result(job)
    assert again["initial_step"] == again["step"] == res["step"] and again["stop"] == "early"


def tf_value(event):
    import tensorflow as tf

    return tf.make_ndarray(event.tensor_proto)


def test_the_wall_clock_cap_stops_after_a_host_call_evaluates_there_and_stays_stopped(data, tmp_path):
    job = write_job(tmp_path, data, train_steps=400, max_train_seconds=0.001)
    train_here(job)
    res = result(job)
    # The cap is looked at before each host call (every worker alike): the first call runs, the one after it sees
    # the cap reached and is the last; its step is evaluated and checkpointed.
    assert (res["stop"], res["step"], [r["step"] for r in res["history"]]) == ("time", 20, [10, 20])
    assert res["budget"]["stop"] == "time" and not res["stopped_early"]
    train_here(job)  # the seconds trained are in the checkpoint: a restart does not train on
    again = result(job)
    assert again["initial_step"] == again["step"] == 20 and again["stop"] == "time"


def test_mirrored_two_devices_matches_default_strategy(single_device_run, data, tmp_path):
    job = write_job(tmp_path, data, strategy="mirrored")
    finish(start(job, "--cpu-devices", "2"))
    res = result(job)
    assert res["replicas"] == 2
    assert trajectory(res) == pytest.approx(trajectory(single_device_run), rel=TRAJECTORY_RTOL)
    # Two replicas choose the export as one device does (trainer.export=best, the default).
    assert res["exported"]["policy"] == single_device_run["exported"]["policy"] == "best"
    assert res["exported"]["step"] == single_device_run["exported"]["step"]
    assert res["exported"]["value"] == pytest.approx(single_device_run["exported"]["value"], rel=TRAJECTORY_RTOL)
    assert res["input"]["verdict"] and res["input"]["ratio"] > 0  # the input check ran under Mirrored too


def test_gradient_accumulation_matches_one_big_batch(single_device_run, data, tmp_path):
    job = write_job(tmp_path, data, gradient_accumulation_steps=4)
    train_here(job)
    assert trajectory(result(job)) == pytest.approx(trajectory(single_device_run), rel=TRAJECTORY_RTOL)


def test_global_batch_not_multiple_of_replicas_is_named(data, tmp_path):
    job = write_job(tmp_path, data, strategy="mirrored", global_batch_size=33)
    out = finish(start(job, "--cpu-devices", "2"), expect=EXIT_BAD_CONFIG)
    assert "trainer.global_batch_size=33" in out and "replica count (2)" in out


def test_gpu_job_on_a_machine_without_gpu_exits_before_training(data, tmp_path):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    job = write_job(tmp_path, data, require_accelerator="gpu")
    out = finish(start(job), expect=EXIT_BAD_CONFIG)
    assert "require_accelerator=gpu but TensorFlow sees no GPU" in out
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "result.json").exists()


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, f"{path.name} not written before exit/timeout"
        time.sleep(0.02)


def test_multi_worker_stops_together_resumes_agrees_and_only_chief_exports(data, tmp_path):
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    checkpoints = tmp_path / "checkpoints"
    jobs, envs = [], []
    for index in range(2):
        # Each worker names its own export dir, so a stray export would show.
        job = write_job(tmp_path / f"worker{index}", data, {"checkpoint_dir": str(checkpoints)},
                        strategy="multi_worker", train_steps=1000, eval_every_steps=250, checkpoint_every_steps=50)
        jobs.append(job)
        envs.append({"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})})

    procs = [start(job, env=env) for job, env in zip(jobs, envs)]
    wait_for(checkpoints / "ckpt-50.index", procs[0])
    procs[1].send_signal(signal.SIGTERM)  # only the non-chief hears it
    for proc in procs:
        finish(proc, expect=EXIT_PREEMPTED)
    stopped = [result(j) for j in jobs]
    assert stopped[0]["step"] == stopped[1]["step"] < 1000
    assert (checkpoints / f"ckpt-{stopped[0]['step']}.index").is_file()
    assert not (tmp_path / "worker0" / "export").exists()  # no export from a preempted run

    for proc in [start(job, env=env) for job, env in zip(jobs, envs)]:
        finish(proc)
    chief, worker = (result(j) for j in jobs)
    assert (chief["chief"], worker["chief"]) == (True, False)
    assert chief["replicas"] == worker["replicas"] == 2
    assert chief["initial_step"] == worker["initial_step"] == stopped[0]["step"]
    assert chief["step"] == worker["step"] == 1000
    assert chief["weights_sha256"] == worker["weights_sha256"]
    assert chief["history"] == worker["history"]
    # Both hold the best evaluation's weights (trainer.export=best), whichever step that was.
    assert chief["exported"] == worker["exported"] and chief["exported"]["policy"] == "best"
    assert (tmp_path / "worker0" / "export" / "saved_model.pb").is_file()
    assert not (tmp_path / "worker1" / "export").exists()


def test_sigterm_saves_and_restart_resumes_to_identical_result(data, tmp_path):
    # The pass budget (planned from the rows, stopped early, the rate halved on plateaus: all of it in the
    # checkpoint), long enough that the signal, sent at the first checkpoint, lands mid-run. The multi-worker test
    # above resumes a step budget.
    settings = dict(train_steps=None, global_batch_size=None, eval_every_steps=None, checkpoint_every_steps=50)
    reference = write_job(tmp_path / "reference", data, **settings)
    interrupted = write_job(tmp_path / "interrupted", data, **settings)
    reference_proc = start(reference)
    proc = start(interrupted)
    wait_for(tmp_path / "interrupted" / "checkpoints" / "ckpt-50.index", proc)
    proc.send_signal(signal.SIGTERM)
    finish(proc, expect=EXIT_PREEMPTED)
    stopped = result(interrupted)
    assert stopped["preempted"] and stopped["stop"] == "preempted" and 50 <= stopped["step"]
    assert (tmp_path / "interrupted" / "checkpoints" / f"ckpt-{stopped['step']}.index").is_file()

    finish(start(interrupted))
    resumed = result(interrupted)
    finish(reference_proc)
    expected = result(reference)
    assert expected["budget"]["by_passes"] and expected["stop"] == "early" and stopped["step"] < expected["step"]
    assert resumed["initial_step"] == stopped["step"] and resumed["step"] == expected["step"]
    assert resumed["weights_sha256"] == expected["weights_sha256"]
    assert resumed["history"][-1] == expected["history"][-1]
    assert resumed["exported"] == expected["exported"] and resumed["budget"] == expected["budget"]


@pytest.mark.parametrize("policy, hlo_type", [
    ("mixed_bfloat16", r"\bbf16\["),  # what trainer.precision=auto picks on a TPU
    ("mixed_float16", r"\bf16\["),  # on a GPU, with loss scaling
], ids=["tpu-bfloat16", "gpu-float16"])
def test_jit_compiles_train_step_with_precision_policy(data, tmp_path, policy, hlo_type):
    dump = tmp_path / "xla"
    job = write_job(tmp_path, data, jit_compile=True, precision=policy)
    finish(start(job, env={"XLA_FLAGS": f"--xla_dump_to={dump}"}))
    losses = trajectory(result(job))
    assert all(math.isfinite(x) for x in losses) and losses[-1] < 0.5 * losses[0]
    # XLA dumped the gradient step it was given: hidden matmuls in the policy's
    # compute type, the logits layer in float32 (3 classes).
    modules = [p.read_text() for p in dump.glob("*gradients*before_optimizations.txt")]
    assert modules, f"XLA compiled no gradient step: {sorted(p.name for p in dump.iterdir())[:20]}"
    assert any(re.search(r"= " + hlo_type + r"[^\n]* dot\(", m) for m in modules)
    assert any(re.search(r"= f32\[\d+,3\]\S* dot\(", m) for m in modules)


def test_jit_step_refuses_an_op_xla_cannot_compile():
    import tensorflow as tf
    import tf_keras

    from trainer.steps import make_gradient_fn
    from trainer.tasks import Multiclass

    class StringRoundTrip(tf_keras.Model):
        """A host-only op in the model, the kind that can't run on a TPU."""

        def __init__(self):
            super().__init__()
            self.dense = tf_keras.layers.Dense(3)

        def call(self, x):
            return self.dense(tf.strings.to_number(tf.strings.as_string(x)))

    model = StringRoundTrip()
    batch = (tf.ones([4, 2]), tf.zeros([4], tf.int64))
    model(batch[0])
    optimizer = tf_keras.optimizers.Adam()
    loss_fn = Multiclass(3).per_example_loss
    make_gradient_fn(model, optimizer, 4, jit_compile=False, loss_fn=loss_fn)((batch,))  # fine without XLA
    with pytest.raises(tf.errors.InvalidArgumentError, match="AsString"):
        make_gradient_fn(model, optimizer, 4, jit_compile=True, loss_fn=loss_fn)((batch,))


@pytest.fixture(scope="module")
def overfitting_data(tmp_path_factory) -> dict:
    """Few noisy training rows: a wide model fits them, and eval loss rises after an early low."""
    from trainer import synthetic

    root = tmp_path_factory.mktemp("overfit")
    noisy = dict(shards=1, label_noise=0.3)
    return {"train_files": synthetic.write_examples(str(root / "train"), 96, seed=10, **noisy),
            "eval_files": synthetic.write_examples(str(root / "eval"), 400, seed=11, **noisy),
            "held_out": synthetic.write_examples(str(root / "held_out"), 2000, seed=12, **noisy)}


def held_out_accuracy(export_dir: Path, pattern: str) -> float:
    """The exported model scored on rows no job read."""
    import numpy as np
    import tensorflow as tf

    from trainer import synthetic

    spec = synthetic.feature_spec(synthetic.layout())
    label = synthetic.layout().label
    rows = tf.data.TFRecordDataset(tf.io.gfile.glob(pattern), compression_type="GZIP").batch(4096)
    features = tf.io.parse_example(next(iter(rows)), spec)
    labels = features.pop(label).numpy()
    logits = tf.saved_model.load(str(export_dir))(features)
    return float(np.mean(np.argmax(logits.numpy(), axis=1) == labels))


def test_best_export_keeps_the_peak_and_beats_last_on_held_out_rows(overfitting_data, tmp_path):
    data = {k: v for k, v in overfitting_data.items() if k != "held_out"}
    # No L2 (the default's 0.01 keeps this model from overfitting): the test needs a run that overfits.
    settings = dict(train_steps=600, eval_every_steps=10, checkpoint_every_steps=20, steps_per_execution=10,
                    hidden_units=[256, 256], learning_rate=0.0005, l2=0.0)
    jobs = {policy: write_job(tmp_path / policy, data, export=policy, **settings) for policy in ("best", "last")}
    for job in jobs.values():
        train_here(job)
    best, last = result(jobs["best"]), result(jobs["last"])
    assert best["history"] == last["history"]  # the policy changes the export, not the training
    history = best["history"]
    eval_losses = [r["eval_loss"] for r in history]
    low = min(range(len(history)), key=eval_losses.__getitem__)
    assert low < len(history) // 2 and eval_losses[-1] > 1.3 * eval_losses[low], eval_losses  # it overfits
    # ... and the verdict says so: the rise is well past the eval loss's standard errors the loop measured.
    from trainer.overfit import NOISE_SES, diagnose
    fit = diagnose(history)
    assert fit.verdict == "overfitting" and fit.noise is None
    assert fit.last_eval_loss - fit.best_eval_loss > NOISE_SES * history[-1]["eval_loss_se"] > 0
    assert history[-1]["eval_examples"] == 400
    # The first evaluation with the highest eval accuracy (the main metric of a multi-class task).
    peak = max(history, key=lambda r: r["eval_accuracy"])
    assert best["exported"]["step"] == peak["step"] < 300  # < 300: the resumed job below must restore it
    assert peak["step"] > history[0]["step"]  # a peak reached by training, not the first evaluation
    assert best["exported"]["value"] == pytest.approx(peak["eval_accuracy"])
    assert last["exported"]["step"] == settings["train_steps"] and last["exported"]["best_step"] == peak["step"]
    assert best["weights_sha256"] != last["weights_sha256"]
    held_out = overfitting_data["held_out"]
    best_score = held_out_accuracy(tmp_path / "best" / "export", held_out)
    last_score = held_out_accuracy(tmp_path / "last" / "export", held_out)
    assert best_score > last_score + 0.02, (best_score, last_score)

    # The best so far lives in the checkpoint: a job stopped before the end and resumed picks the same step.
    split = write_job(tmp_path / "split", data, export="best", **{**settings, "train_steps": 300})
    train_here(split)
    write_job(tmp_path / "split", data, export="best", **settings)
    train_here(split)
    resumed = result(split)
    assert resumed["initial_step"] == 300 and resumed["exported"] == best["exported"]
    assert resumed["weights_sha256"] == best["weights_sha256"]
