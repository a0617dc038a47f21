"""The Evaluator alone, on a finished run's artifacts: wall time and peak RSS of its process tree.

Runs our Evaluator executor (components/evaluation/evaluator.py) with this checkout's eval
config (pipeline/dag/evaluation.py) and Beam args (pipeline/config.py) on the
examples, candidate model and baseline a finished local run recorded in its
MLMD, each run in a fresh process (bench/measure.py samples the tree, Beam's
worker processes included; CPU seconds are the tree's too). `--copies N` evaluates the test split N times over
(its shards repeated under a scratch dir): N times the rows with the same
model, the way to see how time and memory grow without re-running the pipeline.
The metrics of each run are printed, so runs can be compared number for number.

    python -m bench.evaluator_bench RUN_ROOT [--copies 1 3] [--repeat 1] [--before OLD_CHECKOUT]
                                    [--set beam.direct_num_workers=2 ...]

RUN_ROOT is a `pipeline.root` of a finished run (holds metadata/ and pipeline_root/).
Not a timed test; a benchmark to run by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile

from bench.measure import run_measured
from bench.side_by_side import CONFIG_FILE, ENV, MULTI_PROCESS_FROM_ROWS, beam_settings
from components.splits import TEST
from pipeline.config import REPO_ROOT

EVALUATOR_TYPE = "components.evaluation.evaluator.EagerMetricsEvaluator"
MULTI_PROCESS = beam_settings(MULTI_PROCESS_FROM_ROWS)  # the pipeline's Beam settings at scale


def evaluator_inputs(metadata_path: str, execution_id: int | None = None) -> dict:
    """An Evaluator execution's input artifacts as MLMD recorded them (read-only); the newest by default."""
    import ml_metadata as mlmd
    from ml_metadata.proto import metadata_store_pb2
    from tfx.types import artifact_utils

    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = metadata_path
    cfg.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = mlmd.MetadataStore(cfg)
    executions = [e for e in store.get_executions_by_type(EVALUATOR_TYPE)
                  if execution_id is None or e.id == execution_id]
    if not executions:
        raise SystemExit(f"{metadata_path}: no {EVALUATOR_TYPE} execution {execution_id or ''} recorded")
    execution = max(executions, key=lambda e: e.id)
    events = [e for e in store.get_events_by_execution_ids([execution.id])
              if e.type == metadata_store_pb2.Event.INPUT]
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    types = {t.id: t for t in store.get_artifact_types_by_id([a.type_id for a in artifacts.values()])}
    inputs: dict[str, list] = {}
    for e in events:
        a = artifacts[e.artifact_id]
        inputs.setdefault(e.path.steps[0].key, []).append(artifact_utils.deserialize_artifact(types[a.type_id], a))
    return inputs


def _repeat_test_split(examples, copies: int, scratch: str):
    """An Examples artifact whose test split (the Evaluator's) is `copies` times the original's shards."""
    import copy

    split = f"Split-{TEST}"
    src = os.path.join(examples.uri, split)
    dst = os.path.join(scratch, f"examples-x{copies}")
    if not os.path.isdir(os.path.join(dst, split)):
        os.makedirs(os.path.join(dst, split))
        for i in range(copies):
            for f in sorted(os.listdir(src)):
                os.link(os.path.join(src, f), os.path.join(dst, split, f"copy{i}-{f}"))
    repeated = copy.deepcopy(examples)
    repeated.uri = dst
    return repeated


def child(run_root: str, copies: int, overrides: list[str], out: str) -> None:
    """Run the Evaluator executor once, in this process; write its metrics and blessing to `out`/result.json."""
    from tfx.types import standard_component_specs as specs

    from components.evaluation.evaluator import Executor
    from components.evaluation.slicing import SLICING_KEY
    from pipeline.config import load_config
    from pipeline.dag.slices import slice_plan

    config = load_config(CONFIG_FILE, overrides)
    inputs = evaluator_inputs(load_config(CONFIG_FILE, [f"pipeline.root={run_root}"]).pipeline.metadata_path)
    if copies > 1:
        inputs[specs.EXAMPLES_KEY] = [_repeat_test_split(inputs[specs.EXAMPLES_KEY][0], copies,
                                                         os.path.dirname(out))]
    with open(os.path.join(out, "result.json"), "w") as f:
        # As the pipeline runs it: with the slices its config asks for (components/evaluation/slicing.py).
        json.dump(run_executor(Executor, inputs, config, out, {SLICING_KEY: slice_plan(config)}), f, indent=1)


def run_executor(executor_class, inputs: dict, config, out: str, extra: dict | None = None) -> dict:
    """`executor_class` (ours or TFX's) on `inputs` with the config's eval config and Beam args (and `extra`
    execution properties, e.g. the slice plan), writing under `out`: {"metrics": the overall slice's,
    "blessed": [BLESSED or NOT_BLESSED]}."""
    from tfx.types import standard_artifacts
    from tfx.types import standard_component_specs as specs
    from tfx.utils import proto_utils

    from pipeline.dag.beam import beam_pipeline_args
    from pipeline.dag.evaluation import eval_config

    evaluation, blessing = standard_artifacts.ModelEvaluation(), standard_artifacts.ModelBlessing()
    evaluation.uri, blessing.uri = os.path.join(out, "evaluation"), os.path.join(out, "blessing")
    for a in (evaluation, blessing):
        os.makedirs(a.uri, exist_ok=True)
    exec_properties = {specs.EVAL_CONFIG_KEY: proto_utils.proto_to_json(eval_config(config)),
                       specs.EXAMPLE_SPLITS_KEY: json.dumps([TEST]), specs.FAIRNESS_INDICATOR_THRESHOLDS_KEY: "null",
                       **(extra or {})}
    context = executor_class.Context(beam_pipeline_args=beam_pipeline_args(config), tmp_dir=os.path.join(out, "tmp"))
    executor_class(context).Do(inputs, {specs.EVALUATION_KEY: [evaluation], specs.BLESSING_KEY: [blessing]},
                               exec_properties)
    return {"metrics": read_metrics(evaluation.uri), "blessed": sorted(os.listdir(blessing.uri))}


def read_metrics(evaluation_uri: str) -> dict[str, float]:
    """The overall slice's metrics of an evaluation output: {metric name: value}."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(evaluation_uri)
    (slice_key, by_output), = [(k, m) for k, m in result.slicing_metrics if k == ()]
    values = {}
    for output, by_sub_key in by_output.items():
        for sub_key, metrics in by_sub_key.items():
            for name, value in metrics.items():
                key = "/".join(p for p in (output, sub_key, name) if p)
                values[key] = value.get("doubleValue", value)
    return values


def measure_once(run_root: str, copies: int, overrides: list[str], work: str, label: str,
                 checkout: str = str(REPO_ROOT)) -> dict:
    """One run of the executor of `checkout` (this one, or a copy of an older commit with this file in it)."""
    out = tempfile.mkdtemp(prefix=f"{label}-x{copies}-", dir=work)
    command = [sys.executable, "-m", "bench.evaluator_bench", run_root, "--child", out, "--copies", str(copies),
               *[a for s in overrides for a in ("--set", s)]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = run_measured(command, os.path.join(out, "run.log"), env={**ENV, "PYTHONPATH": checkout}, cwd=checkout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of the whole tree (Beam's workers are waited for by the runner, so they count):
    # on a shared machine a steadier figure than wall time.
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if m.returncode != 0:
        raise SystemExit(f"{label} x{copies} failed ({m.returncode}); see {m.log_file}")
    with open(os.path.join(out, "result.json")) as f:
        result = json.load(f)
    load = os.getloadavg()[0]
    shutil.rmtree(os.path.join(out, "tmp"), ignore_errors=True)
    return {"label": label, "copies": copies, "wall_seconds": round(m.wall_seconds, 1), "cpu_seconds": round(cpu, 1),
            "peak_rss_mb": round(m.peak_rss_mb), "load_1min": round(load, 2), **result}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_root")
    p.add_argument("--copies", type=int, nargs="+", default=[1])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   help="config override (section.key=value); default: one multi-processing Beam worker per core")
    p.add_argument("--work", default=None, help="scratch dir for outputs (default: a new temp dir)")
    p.add_argument("--label", default="evaluator")
    p.add_argument("--before", default=None,
                   help="a copy of an older checkout (with this file in bench/): its run before ours, each round")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    overrides = args.overrides or MULTI_PROCESS
    if args.child:
        child(args.run_root, args.copies[0], overrides, args.child)
        return
    work = args.work or tempfile.mkdtemp(prefix="evaluator-bench-")
    sides = [("before", args.before)] if args.before else []
    sides.append((args.label, str(REPO_ROOT)))
    for _ in range(args.repeat):
        for copies in args.copies:
            for label, checkout in sides:
                r = measure_once(args.run_root, copies, overrides, work, label, checkout)
                print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
