"""Runs of one compiled PipelineJob as Vertex's cache decides them, for the caching tests.

What the model holds fixed and what changes, run to run:
- The spec. A schedule runs the spec compiled when it was created, and the
  data source is a fixed URI in it (Snapshot's source_uri), so new data never
  changes the spec: compiling again would give the same JSON.
- What changes is the data behind that URI (`World.source`).

How a run goes, DAG by DAG, task by task in DAG order:
- A DAG task (the condition group) resolves its inputs and evaluates its condition with the dry run's CEL
  evaluator (pipeline/spec/condition.py); its tasks run only when it is true, reading its inputs.
- A task is looked up in the cache when its caching is on (cache_rule.caching_enabled,
  with the run-level override aiplatform would apply) and its key
  (cache_rule.cache_key: input artifact *names*, resolved parameter values,
  output specs, image and the unresolved command/args) equals that of an
  earlier execution that had caching on. A hit's outputs are that execution's
  artifacts (same names) and output parameters.
- A task that executes makes new output artifacts (new names, like MLMD ids).
- Snapshot, executing, copies the source to <snapshots_root>/<digest>/data; a
  digest's directory is written once. Its DatasetSnapshot artifact records it; its
  output parameter new_data is 0 when the model serving now was pushed from a snapshot of
  the same content (the training config never changes here), else 1.
- The ServingModel copies the version serving now (`World.serving`) into a new
  artifact; the Pusher makes the model it pushes the serving one.
- A producer task must be a task of the DAG, as the KFP backend requires
  (backend/src/v2/compiler/argocompiler/dag.go, "unknown producer task").
- The Evaluator blesses every model it evaluates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from typing import Any, Optional

from pipeline.spec import cache_rule

_ids = itertools.count(1)


def _new_artifact() -> str:
    return f"projects/p/locations/us-central1/metadataStores/default/artifacts/{next(_ids)}"


@dataclasses.dataclass
class TaskRun:
    hit: bool
    inputs: dict[str, list[str]]  # input name -> artifact names
    parameters: dict[str, Any]
    outputs: dict[str, list[str]]  # output name -> artifact names
    output_parameters: dict[str, Any]


@dataclasses.dataclass
class World:
    """Everything outside the spec: the data source, the snapshot store, the cache, ML Metadata."""
    source: str = ""
    files: dict[str, str] = dataclasses.field(default_factory=dict)  # path -> contents
    cache: dict[str, TaskRun] = dataclasses.field(default_factory=dict)  # fingerprint -> first execution
    serving: Optional[str] = None  # the model artifact the serving version was pushed from
    snapshots: dict[str, str] = dataclasses.field(default_factory=dict)  # DatasetSnapshot artifact -> data dir
    copies: dict[str, Optional[str]] = dataclasses.field(default_factory=dict)  # ServingModel artifact -> model
    serving_data: Optional[str] = None  # the data dir of the snapshot the serving version was trained on

    def run(self, job: dict, enable_caching: Optional[bool] = None) -> dict[str, TaskRun]:
        """One PipelineJob run; `enable_caching` is aiplatform's run-level override. Tasks of a DAG whose
        condition was false are not in the result."""
        spec = job["pipelineSpec"]
        done: dict[str, TaskRun] = {}
        self._dag(spec, spec["root"], {}, {}, done, enable_caching)
        return done

    def _dag(self, spec: dict, component: dict, artifacts: dict, parameters: dict, done: dict[str, TaskRun],
             enable_caching: Optional[bool]) -> None:
        from pipeline.spec import condition

        tasks = component["dag"]["tasks"]
        here: dict[str, TaskRun] = {}
        while len(here) < len(tasks):
            ready = [n for n, t in tasks.items() if n not in here and _upstream(t) <= set(here)]
            assert ready, f"cycle or unknown producer among {set(tasks) - set(here)}"
            for name in ready:
                task = tasks[name]
                inputs, values = _resolve(task, here, artifacts, parameters)
                sub = spec["components"][task["componentRef"]["name"]]
                if "dag" not in sub:
                    here[name] = done[name] = self._task(spec, name, task, inputs, values, enable_caching)
                    continue
                here[name] = done[name] = TaskRun(False, inputs, values, {}, {})
                test = task.get("triggerPolicy", {}).get("condition")
                if not test or condition.evaluate(condition.parse(test, name),
                                                  {"inputs": {"parameterValues": values}}, name):
                    self._dag(spec, sub, inputs, values, done, enable_caching)

    def _task(self, spec: dict, name: str, task: dict, inputs: dict, parameters: dict,
              enable_caching: Optional[bool]) -> TaskRun:
        component = spec["components"][task["componentRef"]["name"]]
        executor = cache_rule.task_executor(spec, task)
        container = executor.get("container", {})
        assert "lifecycle" not in container, f"{name}: Vertex would run a pre-cache-check hook this model lacks"
        outputs_spec = component.get("outputDefinitions", {})
        key = cache_rule.fingerprint(cache_rule.cache_key(
            input_artifact_names=inputs, input_parameter_values=parameters,
            output_artifacts={k: {"type": v["artifactType"]} for k, v in outputs_spec.get("artifacts", {}).items()},
            output_parameter_types={k: v.get("parameterType") or v.get("type")
                                    for k, v in outputs_spec.get("parameters", {}).items()},
            image=container.get("image", ""), command=container.get("command", []),
            args=container.get("args", [])))
        caching = cache_rule.caching_enabled(task, enable_caching)
        if caching and key in self.cache:
            hit = self.cache[key]
            return TaskRun(True, inputs, parameters, hit.outputs, hit.output_parameters)
        outputs = {k: [_new_artifact()] for k in outputs_spec.get("artifacts", {})}
        output_parameters = self._execute(name, executor, inputs, parameters, outputs)
        result = TaskRun(False, inputs, parameters, outputs, output_parameters)
        if caching:
            self.cache[key] = result
        return result

    def _execute(self, name: str, executor: dict, inputs: dict, parameters: dict, outputs: dict) -> dict:
        """The side effects and output parameters of the tasks that have any."""
        assert "resolver" not in executor and "importer" not in executor, f"{name}: not modelled"
        if name == "Snapshot":
            data_dir = f"{parameters['snapshots_root']}/{_digest(self.source)}/data"
            self.files.setdefault(data_dir, self.source)
            self.snapshots[outputs["snapshot"][0]] = data_dir
            return {"new_data": 0 if self.serving_data == data_dir else 1}
        if name == "ServingModel":
            self.copies[outputs["model"][0]] = self.serving
        if name == "Pusher":
            self.serving = inputs["model"][0]
            self.serving_data = self.snapshots[inputs["snapshot"][0]]
        return {}


def _upstream(task: dict) -> set[str]:
    inputs = task.get("inputs", {})
    producers = {v[field]["producerTask"] for kind in ("artifacts", "parameters")
                 for v in inputs.get(kind, {}).values()
                 for field in ("taskOutputArtifact", "taskOutputParameter") if field in v}
    return producers | set(task.get("dependentTasks", []))


def _resolve(task: dict, here: dict[str, TaskRun], artifacts: dict, parameters: dict) -> tuple[dict, dict]:
    """The task's input artifact names and parameter values: from its DAG's tasks or the DAG's own inputs."""
    inputs, values = {}, {}
    for key, source in task.get("inputs", {}).get("artifacts", {}).items():
        if "taskOutputArtifact" in source:
            ref = source["taskOutputArtifact"]
            inputs[key] = list(here[ref["producerTask"]].outputs[ref["outputArtifactKey"]])
        else:
            inputs[key] = artifacts[source["componentInputArtifact"]]
    for key, source in task.get("inputs", {}).get("parameters", {}).items():
        if "taskOutputParameter" in source:
            ref = source["taskOutputParameter"]
            values[key] = here[ref["producerTask"]].output_parameters[ref["outputParameterKey"]]
        elif "componentInputParameter" in source:
            values[key] = parameters[source["componentInputParameter"]]
        else:
            values[key] = _parameter(source)
    return inputs, values


def _parameter(value: dict) -> Any:
    if "taskFinalStatus" in value:  # the exit handler's input: not modelled beyond naming its producer
        return value["taskFinalStatus"]["producerTask"]
    constant = value["runtimeValue"]["constantValue"]
    if "intValue" in constant:
        return int(constant["intValue"])
    if "doubleValue" in constant:
        return float(constant["doubleValue"])
    return constant.get("stringValue", "")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
