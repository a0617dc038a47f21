"""The DAG: snapshot -> ExampleGen -> statistics/schema -> validation -> Transform
-> (Tuner) -> Trainer -> Evaluator (vs the model serving now) -> Pusher."""

from __future__ import annotations

from typing import Optional

# TFX from its defining modules, not `tfx.v1`: that also imports the Vertex and
# BigQuery extensions (google-cloud-aiplatform, kfp), seconds a local run never uses.
from tfx.components import ExampleValidator, SchemaGen, StatisticsGen
from tfx.orchestration.metadata import sqlite_metadata_connection_config
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, trainer_pb2

from components.coordination.run_lease import OWNER_PLACEHOLDER
from components.data.data_gate import DataGate
from components.data.drift_gate import DriftGate
from components.data.example_gen import SnapshotExampleGen, SpanSnapshotExampleGen
from components.data.schema_import import SchemaImport
from components.data.snapshot.component import SNAPSHOT_KEY, Snapshot
from components.evaluation.evaluator import EagerMetricsEvaluator
from components.pusher import Pusher
from components.serving.serving_model import ServingModel
from components.splits import TEST
from components.transform import ANALYZER_CACHE_ROOT, LEASE_ROOT, DeterministicTransform
from pipeline.config import Config, resolve
from pipeline.dag.beam import beam_pipeline_args
from pipeline.dag.canary import canary_check_step
from pipeline.dag.conditions import checks_new_span, only_with_new_span, training_config_digest
from pipeline.dag.evaluation import eval_config
from pipeline.dag.inference import inference_steps
from pipeline.dag.run_lease import first_task, lease_everything
from pipeline.dag.slices import slice_plan
from pipeline.dag.splits import split_output
from pipeline.dag.tuning import tuning_step
from pipeline.dag.vertex_training import trainer_class, trainer_custom_config
from pipeline.data.checks import check_features
from pipeline.runs.lineage import CODE_VERSION_KEY, code_version
from trainer.features import CONFIG_KEY as FEATURES_KEY

# Functions are named by import path, not uploaded as module files: the code
# is baked into the pipeline image, so compiling for Vertex needs no GCS.
PREPROCESSING_FN = "trainer.preprocessing.preprocessing_fn"
RUN_FN = "trainer.run_fn.run_fn"
SNAPSHOT_ID = "Snapshot"
DRIFT_GATE_ID = "DriftGate"
SERVING_MODEL_ID = "ServingModel"


def create_pipeline(config: Config, metadata_path: Optional[str] = None, run_lease: bool = False) -> Pipeline:
    """The DAG; with `run_lease` (a compiled run, which no process lives through) its first task takes the
    root's run lease for the run (pipeline/dag/run_lease.py; the compile adds the exit handler releasing it)."""
    # Over 60 lines on purpose: the whole DAG reads top to bottom on one page,
    # each component next to the channels it is wired to.
    # Also when compiling for Vertex: a features section that can't fit the schema stops here.
    check_features(config)
    # Transform and Trainer each resolve the same features section against the schema they get.
    features = {FEATURES_KEY: config.features.model_dump()}
    code = code_version()
    schema_file = resolve(config.data.schema_file) if config.data.schema_file else None
    snapshot = Snapshot(source_uri=resolve(config.data.input_dir), snapshots_root=config.snapshots_root,
                        digest=config.snapshot.digest, span_selection=config.data.spans,
                        span_ready_marker=config.data.span_ready_marker,
                        missing_values=config.data.missing_values, serving_dir=config.pipeline.serving_dir,
                        skip_when_no_new_span=checks_new_span(config),
                        training_config=training_config_digest(config, code),
                        schema_file=schema_file).with_id(SNAPSHOT_ID)
    # With serving.check.before_run: the canary promoted, rolled back or left out on the evidence first, so the
    # run's "model serving now" (newness, drift baseline, Evaluator baseline, warm start) is what should serve.
    canary_check = canary_check_step(config, run_lease)
    if canary_check is not None:
        snapshot.add_upstream_node(canary_check)
    # With data.skip_when_no_new_span, the rest runs only if the snapshot holds data (a span, or a flat
    # source's content) or a training config the serving model was not trained on (pipeline/dag/conditions.py):
    # one check, locally, on Vertex and on Kubeflow.
    with only_with_new_span(config, snapshot):
        # TFX's CsvExampleGen on the snapshot's data dir, read from the snapshot artifact, its input
        # (components/data/example_gen.py). With the analyzer cache, each span's rows in files of their own,
        # so Transform can analyze a span alone. Same id as TFX's.
        example_gen = (SpanSnapshotExampleGen if config.data.analyzer_cache else SnapshotExampleGen)(
            snapshot=snapshot.outputs[SNAPSHOT_KEY],
            # In span layout the snapshot keeps each span in its own directory; flat: TFX's default ("*").
            input_config=example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*/*")])
            if config.data.spans else None,
            output_config=split_output(config)
        ).with_id("CsvExampleGen")

        statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])
        if config.data.schema_file:
            # TFX's ImportSchemaGen, but an edited schema file is not a cache hit; same id as TFX's.
            schema_gen = SchemaImport(schema_file=schema_file).with_id("ImportSchemaGen")
        else:
            schema_gen = SchemaGen(
                statistics=statistics_gen.outputs["statistics"], infer_feature_shape=True)
        example_validator = ExampleValidator(
            statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"])
        data_gate = DataGate(anomalies=example_validator.outputs["anomalies"],
                             tolerated_anomalies=",".join(config.data_gate.tolerated_anomalies))

        # Same component and id as TFX's Transform; fixed batches make reruns bit-identical.
        transform = DeterministicTransform(
            examples=example_gen.outputs["examples"], schema=schema_gen.outputs["schema"],
            preprocessing_fn=config.features.preprocessing_fn or PREPROCESSING_FN,
            custom_config={**features, ANALYZER_CACHE_ROOT: config.pipeline.analyzer_cache_root,
                           LEASE_ROOT: config.pipeline.root_uri}
            if config.data.analyzer_cache else features,
            # StatisticsGen already describes the raw data; skipping Transform's own
            # pre/post-transform statistics saves a full pass over the data.
            disable_statistics=True,
            # TFX's cache channels would make the cache an input and defeat execution caching
            # on reruns; data.analyzer_cache keeps it in a side store (components/analyzer_cache.py).
            disable_analyzer_cache=True).with_id("Transform")
        transform.add_upstream_node(data_gate)
        gates = [data_gate]
        if config.drift_gate.enabled:
            # Compares with the training data of the version serving now, found in the serving dir at run time.
            drift_gate = DriftGate(snapshot=snapshot.outputs[SNAPSHOT_KEY], schema=schema_gen.outputs["schema"],
                                   serving_dir=config.pipeline.serving_dir, thresholds=config.drift_gate.as_json(),
                                   accepted=",".join(config.drift_gate.accepted),
                                   features=config.features.model_dump_json()).with_id(DRIFT_GATE_ID)
            # Broken data is the data gate's to report; drift is measured on data that passed it.
            drift_gate.add_upstream_node(data_gate)
            transform.add_upstream_node(drift_gate)
            gates.append(drift_gate)

        # The model serving now, found in the serving dir at run time: the Evaluator's baseline and, with
        # trainer.warm_start, the model whose weights training starts from (trainer/warm_start.py).
        serving_model = ServingModel(serving_dir=config.pipeline.serving_dir).with_id(SERVING_MODEL_ID)

        # With a tuning section, the search over the trainer's hyperparameters, each trial trained by the same loop
        # (components/tuner/; on Vertex a HyperparameterTuningJob of the Trainer's CustomJob); with
        # tuning.reuse: latest, the last search's result on this root instead. None without one.
        tuner = tuning_step(config, examples=transform.outputs["transformed_examples"],
                            transform_graph=transform.outputs["transform_graph"], schema=schema_gen.outputs["schema"],
                            custom_config={**features, CODE_VERSION_KEY: code})

        # On Vertex the same run_fn runs as a CustomJob on the configured TPU/GPU/CPU pool.
        trainer = trainer_class(config)(
            run_fn=RUN_FN,
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema_gen.outputs["schema"],
            base_model=serving_model.outputs["model"] if config.trainer.warm_start else None,
            hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
            # The loop counts its own steps from the trainer config; TFX's train_args only need to agree
            # for its bookkeeping (none with a pass budget: trainer/budget.py plans the steps from the data).
            train_args=trainer_pb2.TrainArgs(num_steps=config.trainer.train_steps),
            eval_args=trainer_pb2.EvalArgs(num_steps=None),
            custom_config={**trainer_custom_config(config), **features, CODE_VERSION_KEY: code})

        # On the test split, which nothing before it read; Transform's output gives it the trivial model's labels.
        evaluator = EagerMetricsEvaluator(
            examples=example_gen.outputs["examples"],
            model=trainer.outputs["model"],
            baseline_model=serving_model.outputs["model"],
            transformed_examples=transform.outputs["transformed_examples"],
            eval_config=eval_config(config), example_splits=[TEST],
            # The slices (evaluator.slices, or one per categorical column of the run's column roles) and their
            # gates, decided when it runs (components/evaluation/slicing.py).
            transform_graph=transform.outputs["transform_graph"],
            slice_plan=slice_plan(config)).with_id("Evaluator")

        # TFX's Pusher, but it never re-pushes the serving model, a version appears whole with its warm-up file once
        # a TensorFlow-only process served it (docs/serving.md), and beside it a record of the data it was trained
        # on: the drift gate's baseline in later runs.
        pusher = Pusher(
            model=trainer.outputs["model"],
            model_blessing=evaluator.outputs["blessing"],
            statistics=statistics_gen.outputs["statistics"],
            snapshot=snapshot.outputs[SNAPSHOT_KEY],
            # Eval rows for the warm-up file; the serving gate replays it in a TensorFlow-only process first.
            examples=example_gen.outputs["examples"],
            serving=config.serving.gate_settings(
                config.pipeline.name, (config.features.label, *config.features.ignore), config.vertex).to_json(),
            # Whose run lease tells a killed push's debris from another run's push in progress.
            lease_root=config.pipeline.root_uri,
            lease_owner=OWNER_PLACEHOLDER if run_lease else None,
            lease_ttl_seconds=config.pipeline.run_lease_ttl_seconds,
            push_destination=pusher_pb2.PushDestination(
                filesystem=pusher_pb2.PushDestination.Filesystem(
                    base_directory=config.pipeline.serving_dir))).with_id("Pusher")

        # With inference.input_dir: its snapshot scored by the model just pushed, or the one serving.
        inference = inference_steps(config, schema=schema_gen.outputs["schema"],
                                    pushed_model=pusher.outputs["pushed_model"],
                                    serving_model=serving_model.outputs["model"])

    components = [*([canary_check] if canary_check else []),
                  snapshot, example_gen, statistics_gen, schema_gen, example_validator, *gates, transform,
                  *([tuner] if tuner else []), serving_model, trainer, evaluator, pusher, *inference]
    if run_lease:
        lease = first_task(config)
        lease_everything(lease, components)
        components.insert(0, lease)
    return Pipeline(
        pipeline_name=config.pipeline.name,
        pipeline_root=config.pipeline.pipeline_root,
        components=components,
        enable_cache=config.pipeline.enable_cache,
        metadata_connection_config=(
            sqlite_metadata_connection_config(metadata_path)
            if metadata_path else None),
        beam_pipeline_args=beam_pipeline_args(config))
