"""The dry run's parts, each against the real thing it stands in front of, without running the pipeline.

A tiny two-task PipelineJob (plain `python -c` containers) goes through the
whole dry run to show Vertex's cache rule across runs; the Vertex emulator
answers the real TFX training client in its own process. The spec rules are
tested in test_dryrun_rules.py, conditions in test_dryrun_conditions.py.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.dryrun import launcher
from pipeline.dryrun.job_board import JobBoard
from pipeline.dryrun.training import workers
from tests.vertex_support import vertex_config

# -- spec pieces ----------------------------------------------------------------

def test_beam_args_of_the_entrypoint_are_kept_and_dataflow_ones_replaced():
    args = ["--executor_class_path", "a.B", "--json_serialized_invocation_args", "{{$}}", "--runner=DataflowRunner",
            "--project=p", "--no_use_public_ips"]
    assert launcher.uses_dataflow(args)
    assert launcher.replace_dataflow_args(args, ["--runner=Local"]) == [*args[:4], "--runner=Local"]
    assert launcher.replace_dataflow_args(args[:4], ["--runner=Local"]) == args[:4]


# -- the whole dry run on a tiny job ----------------------------------------------

_ECHO = ("import json, pathlib, sys; ei = json.loads(sys.argv[1]); out = pathlib.Path(ei['outputs']['outputFile']); "
         "out.parent.mkdir(parents=True, exist_ok=True); "
         "out.write_text(json.dumps({'parameterValues': {'text': ei['inputs']['parameterValues']['word'] + '!'}}))")


def _tiny_job(path: Path, enable_cache: bool = True) -> Path:
    def task(name, word, upstream=()):
        return {"taskInfo": {"name": name}, "componentRef": {"name": "comp-echo"}, "dependentTasks": list(upstream),
                "inputs": {"parameters": {"word": word}}, "cachingOptions": {"enableCache": enable_cache}}
    spec = {"pipelineInfo": {"name": "tiny"}, "schemaVersion": "2.1.0", "sdkVersion": "test",
            "root": {"dag": {"tasks": {
                "first": task("first", {"runtimeValue": {"constant": "hello"}}),
                "second": task("second", {"taskOutputParameter": {"producerTask": "first",
                                                                  "outputParameterKey": "text"}}, ["first"])}}},
            "components": {"comp-echo": {"executorLabel": "exec-echo",
                                         "inputDefinitions": {"parameters": {"word": {"parameterType": "STRING"}}},
                                         "outputDefinitions": {"parameters": {"text": {"parameterType": "STRING"}}}}},
            "deploymentSpec": {"executors": {"exec-echo": {"container": {
                "image": "python:3.10", "command": ["python", "-c", _ECHO], "args": ["{{$}}"]}}}}}
    path.write_text(json.dumps({"pipelineSpec": spec, "runtimeConfig": {}}))
    return path


@pytest.mark.parametrize("enable_cache", [True, False])
def test_a_second_run_is_served_from_cache_only_when_the_submitted_job_says_so(tmp_path, enable_cache):
    from pipeline.dryrun.run import dry_run

    # Submit keeps each task's compiled caching option, so the job's own tasks decide.
    config = vertex_config("pipeline.name=tiny")
    template = _tiny_job(tmp_path / "tiny.json", enable_cache)
    out = io.StringIO()
    result = dry_run(config, tmp_path / "dry", runs=2, stream=out, template=template)
    first, second = result.runs
    assert first.task("second").outputs.parameters == {"text": "hello!!"}
    assert [t.state for t in first.tasks] == ["ran", "ran"]
    assert [t.state for t in second.tasks] == (["cached", "cached"] if enable_cache else ["ran", "ran"])
    assert second.task("second").outputs.parameters == {"text": "hello!!"}
    assert ("cache hits: first, second" in out.getvalue()) == enable_cache
    assert second.summary.run_id == second.job_id != first.job_id


_EXIT_PROBE = """
import atexit, gc, sitecustomize
atexit.register(lambda: print("before freeze:", gc.get_freeze_count()))
atexit._run_exitfuncs()
print("after:", gc.get_freeze_count() > 0, sitecustomize.__file__)
"""


def test_task_processes_freeze_their_heap_as_the_last_thing_before_exit():
    from pipeline.dryrun.run import TASK_SITE, _task_env

    out = subprocess.run([sys.executable, "-c", _EXIT_PROBE], env=_task_env(), capture_output=True, text=True,
                         check=True).stdout
    # The task's own exit handlers (registered later) run first, on an unfrozen heap.
    assert out.splitlines() == ["before freeze: 0", f"after: True {TASK_SITE / 'sitecustomize.py'}"], out


# -- the Trainer's CustomJob --------------------------------------------------------

def _settings(tmp_path, notes):
    return workers.Settings({"PATH": "/usr/bin:/bin"}, tmp_path / "logs", lambda uri: uri, notes.append, tmp_path)


def test_tpu_pool_runs_on_cpu_with_the_strategy_changed_and_tpu_runtime_withheld(tmp_path):
    props = {"custom_config": json.dumps({"trainer": {"strategy": "tpu", "train_steps": 5,
                                                      "require_accelerator": "tpu"}})}
    pool = {"machine_spec": {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"}, "replica_count": 1,
            "container_spec": {"image_uri": "i", "command": ["python", "-m", "x", "--exec-properties",
                                                             json.dumps(props)],
                               "env": [{"name": "TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "value": "/lib/libtpu.so"},
                                       {"name": "PJRT_DEVICE", "value": "TPU"},
                                       {"name": "LOG_FORMAT", "value": "json"}]}}
    notes = []
    run = workers.plan("projects/p/locations/r/customJobs/1", {"job_spec": {"worker_pool_specs": [pool]}},
                       _settings(tmp_path, notes))
    (replica,) = run.replicas
    sent = json.loads(replica.command[replica.command.index("--exec-properties") + 1])
    assert json.loads(sent["custom_config"])["trainer"] == {"strategy": "default", "train_steps": 5,
                                                            "require_accelerator": None}
    assert replica.command[0] == sys.executable
    assert "TF_PLUGGABLE_DEVICE_LIBRARY_PATH" not in replica.env and "PJRT_DEVICE" not in replica.env
    assert replica.env["LOG_FORMAT"] == "json"
    assert json.loads(replica.env["CLUSTER_SPEC"])["task"] == {"type": "workerpool0", "index": 0}
    text = "\n".join(notes)
    assert "DEVICE EMULATED" in text and "strategy 'tpu' -> 'default'" in text and "withheld" in text
    assert "require_accelerator 'tpu' -> None" in text


def test_python_package_pools_are_refused_naming_the_field(tmp_path):
    pool = {"python_package_spec": {"executor_image_uri": "i"}, "replica_count": 1}
    with pytest.raises(workers.JobRefused, match=r"job_spec.worker_pool_specs\[0\].python_package_spec"):
        workers.plan("n", {"job_spec": {"worker_pool_specs": [pool]}}, _settings(tmp_path, []))


_CLIENT = """
import sys
from tfx.extensions.google_cloud_ai_platform import training_clients
client = training_clients.VertexJobClient('us-central1')
command = ['python', '-c', 'import os; print(os.environ["CLUSTER_SPEC"])']
pools = [{'machine_spec': {'machine_type': 'n1-standard-4'}, 'replica_count': 1,
          'container_spec': {'image_uri': 'i', 'command': command}}]
pools.append({**pools[0]})
client.launch_job('test-project', {'display_name': 'x', 'job_spec': {'worker_pool_specs': pools}})
print('STATE', client.get_job_state(client.get_job()).name)
"""


def test_the_tfx_training_client_reaches_the_emulator_and_its_job_runs(tmp_path):
    from pipeline.dryrun.training.customjob import VertexEmulator

    notes = []
    settings = _settings(tmp_path, notes)
    with VertexEmulator("test-project", "us-central1", tmp_path / "emulator",
                        lambda name, job: workers.start(name, job, settings), notes.append,
                        JobBoard(tmp_path / "jobs")) as emulator:
        settings.env.update(emulator.env)
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path.cwd()), "TF_USE_LEGACY_KERAS": "1", **emulator.env}
        client = subprocess.run([sys.executable, "-W", "ignore", "-c", _CLIENT], env=env, capture_output=True,
                                text=True, timeout=300)
        jobs = [run for run, _ in emulator.jobs.values()]
    assert "STATE JOB_STATE_SUCCEEDED" in client.stdout, client.stderr[-3000:]
    (job,) = jobs
    assert [(r.pool, r.returncode) for r in job.replicas] == [("workerpool0", 0), ("workerpool1", 0)]
    printed = json.loads(job.replicas[1].log.read_text())
    assert printed["task"] == {"type": "workerpool1", "index": 0} and len(printed["cluster"]) == 2


def test_calls_other_than_the_jobservice_are_refused_loudly(tmp_path):
    from pipeline.dryrun.training.customjob import VertexEmulator

    script = ("from google.cloud.aiplatform import gapic; c = gapic.EndpointServiceClient(client_options="
              "{'api_endpoint': 'us-central1-aiplatform.googleapis.com'}); "
              "c.get_endpoint(name='projects/test-project/locations/us-central1/endpoints/1')")
    notes = []
    with VertexEmulator("test-project", "us-central1", tmp_path / "emulator", lambda n, j: None,
                        notes.append, JobBoard(tmp_path / "jobs")) as emulator:
        env = {"PATH": "/usr/bin:/bin", **emulator.env}
        client = subprocess.run([sys.executable, "-W", "ignore", "-c", script], env=env, capture_output=True,
                                text=True, timeout=120)
    assert client.returncode != 0 and "is not emulated" in client.stderr
    assert "EndpointService/GetEndpoint is not emulated" in emulator.errors[0]


def test_a_run_asks_the_emulator_how_a_dry_run_job_is_doing_with_the_real_vertex_client(tmp_path):
    """GetPipelineJob for the dry runs' own jobs (pipeline/dryrun/job_board.py): what a run lease asks about the
    run holding it and an exit handler about its failed task (components/coordination/job_state.py, over gRPC as on
    Vertex)."""
    from pipeline.dryrun.training.customjob import VertexEmulator

    board = JobBoard(tmp_path / "jobs")
    name = "projects/test-project/locations/us-central1/pipelineJobs/job-1"
    board.start("job-1", name)
    for task, parent, state, error in (("tfx-dag", "", "failed", "a task of its DAG failed"),
                                       ("RunLease", "tfx-dag", "ran", ""), ("Transform", "tfx-dag", "failed", "OOM")):
        board.task("job-1", task, parent, state, error)
    board.end("job-1", succeeded=False)
    script = ("import sys; from components.coordination.job_state import VertexJobs; j = VertexJobs(); "
              f"print('ENDED', j.ended({name!r})); print('FAILED', j.failures({name!r})); "
              "print('MISSING', j.ended('projects/test-project/locations/us-central1/pipelineJobs/nope'))")
    with VertexEmulator("test-project", "us-central1", tmp_path / "emulator", lambda n, j: None, print,
                        board) as emulator:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path.cwd()), **emulator.env}
        client = subprocess.run([sys.executable, "-W", "ignore", "-c", script], env=env, capture_output=True,
                                text=True, timeout=120)
    assert "ENDED PIPELINE_STATE_FAILED" in client.stdout, client.stderr[-3000:]
    assert "FAILED [('Transform', 'OOM')]" in client.stdout  # not the DAG task that failed because of it
    assert "MISSING None" in client.stdout and not emulator.errors


# -- config -------------------------------------------------------------------------

def test_dryrun_needs_a_vertex_section(tmp_path):
    from pipeline.dryrun.run import dry_run
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="vertex section"):
        dry_run(load_config("configs/local.yaml"), tmp_path)
