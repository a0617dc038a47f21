"""Transform's analyzer cache across runs of a rolling window: only unseen spans are analyzed, nothing else changes.

Real TFX executors (the span ExampleGen, then Transform) on windows of spans
cut from the bundled penguins data, with tf.Transform's own cache on disk.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
from tfx.types import channel, standard_artifacts

from components import analyzer_cache
from components import transform as transform_component
from components.coordination import lease
from components.data import span_example_gen
from pipeline.config import REPO_ROOT, load_config
from pipeline.dag.pipeline import PREPROCESSING_FN
from pipeline.local.lock import run_lock
from tests.conftest import CONFIG
from tests.test_span_example_gen import records, run_example_gen, snapshot, write_spans

SPANS = {"span-1": slice(0, 90), "span-2": slice(90, 180), "span-3": slice(180, 270), "span-4": slice(270, None)}


def _features(ignore: tuple[str, ...] = ()) -> dict:
    features = load_config(CONFIG).features.model_dump()
    features["numeric"] = [f for f in features["numeric"] if f["name"] not in ignore]
    features["ignore"] += list(ignore)
    return {"features": features}


def _transform(examples, out: Path, cache_root: Path | None, features: dict) -> standard_artifacts.TransformGraph:
    schema = standard_artifacts.Schema()
    schema.uri = str(out / "schema")
    (out / "schema").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "schema" / "penguins.pbtxt", out / "schema" / "schema.pbtxt")
    cache = {transform_component.ANALYZER_CACHE_ROOT: str(cache_root)} if cache_root else {}
    component = transform_component.DeterministicTransform(
        examples=channel.Channel(type=standard_artifacts.Examples),
        schema=channel.Channel(type=standard_artifacts.Schema),
        preprocessing_fn=PREPROCESSING_FN, custom_config={**features, **cache},
        disable_statistics=True, disable_analyzer_cache=True)
    outputs = {}
    for key, ch in component.outputs.items():
        artifact = ch.type()
        artifact.uri = str(out / key)
        outputs[key] = [artifact]
    context = BaseBeamExecutor.Context(beam_pipeline_args=load_config(CONFIG).beam.args, tmp_dir=str(out / "tmp"),
                                       unique_id="1")
    transform_component.Executor(context).Do({"examples": [examples], "schema": [schema]}, outputs,
                                             dict(component.exec_properties))
    return outputs["transform_graph"][0]


def _spans(graph, prop: str) -> list[str]:
    return [s for s in graph.get_string_custom_property(prop).split(",") if s]


def _transformed(graph, examples) -> dict[str, np.ndarray]:
    """The transform graph applied to the window's eval rows."""
    rows = [tf.train.Example.FromString(r) for r in records(f"{examples.uri}/Split-eval/*")]
    output = tft.TFTransformOutput(graph.uri)
    layer = output.transform_features_layer()
    parsed = tf.io.parse_example([r.SerializeToString() for r in sorted(rows, key=str)],
                                 output.raw_feature_spec())
    return {k: v.numpy() for k, v in layer(parsed).items()}


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("windows")
    made = {}
    for name, spans in (("first", ("span-1", "span-2", "span-3")), ("next", ("span-2", "span-3", "span-4"))):
        window = write_spans(tmp / f"source-{name}", {s: SPANS[s] for s in spans})
        made[name] = run_example_gen(span_example_gen.Executor(), snapshot(window, tmp / "snapshots"), tmp / name)
    return tmp, made


@pytest.fixture(scope="module")
def first_run(windows):
    """Transform on the first window, filling a cache; each test copies that cache, so none sees another's."""
    tmp, examples = windows
    graph = _transform(examples["first"], tmp / "t-first", tmp / "cache-first", _features())
    assert _spans(graph, transform_component.ANALYZED_SPANS) == ["span-1", "span-2", "span-3"]
    assert _spans(graph, transform_component.CACHED_SPANS) == []
    return graph, tmp / "cache-first"


def _cache_after_first_run(first_run, where: Path) -> Path:
    shutil.copytree(first_run[1], where)
    return where


def test_the_next_window_analyzes_only_its_new_span_and_transforms_as_without_a_cache(windows, first_run, tmp_path):
    _, examples = windows
    warm = _transform(examples["next"], tmp_path / "t-warm", _cache_after_first_run(first_run, tmp_path / "cache"),
                      _features())
    assert _spans(warm, transform_component.ANALYZED_SPANS) == ["span-4"]
    assert _spans(warm, transform_component.CACHED_SPANS) == ["span-2", "span-3"]

    # An empty cache analyzing every span is the first window's run (the fixture); this one has no cache at all.
    cold = _transform(examples["next"], tmp_path / "t-cold", None, _features())
    a, b = _transformed(warm, examples["next"]), _transformed(cold, examples["next"])
    assert a.keys() == b.keys()
    for key in a:  # floats up to summation order: the cache combines per-span partial sums
        if a[key].dtype.kind == "f":
            np.testing.assert_allclose(a[key], b[key], rtol=1e-6, atol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # And the cache did matter: the first window's statistics differ from the next one's.
    c = _transformed(first_run[0], examples["next"])
    assert any(not np.array_equal(a[k], c[k]) for k in a)


def test_an_edited_features_section_is_not_served_from_the_cache(windows, first_run, tmp_path):
    _, examples = windows
    edited = _transform(examples["next"], tmp_path / "t", _cache_after_first_run(first_run, tmp_path / "cache"),
                        _features(ignore=("body_mass_g",)))
    assert _spans(edited, transform_component.ANALYZED_SPANS) == ["span-2", "span-3", "span-4"]
    assert _spans(edited, transform_component.CACHED_SPANS) == []


def test_a_generation_is_visible_only_once_published_and_old_ones_go(tmp_path):
    root, cache = tmp_path / "root", tmp_path / "cache"
    store = analyzer_cache.GenerationStore(str(cache), lease_root=str(root))
    assert store.latest() is None
    gens = []
    for _ in range(4):  # four runs, one after the other, each holding the root's lock
        with run_lock(str(root), 0):
            gen = store.new()
            Path(gen).mkdir(parents=True)
            assert store.latest() != gen
            store.publish(gen)
            assert store.latest() == gen
            gens.append(gen)
    unpublished = store.new()
    Path(unpublished).mkdir()
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == sorted(
        Path(g).name for g in (gens[-2], gens[-1], unpublished))


def _begin(store: analyzer_cache.GenerationStore) -> str:
    gen = store.new()
    Path(gen).mkdir(parents=True)
    (Path(gen) / "entry").write_text("being written")
    return gen


@pytest.mark.parametrize("leased", [True, False], ids=["a-run-holds-the-lease", "no-lease"])
def test_a_generation_a_live_run_is_still_writing_survives_other_runs_publishing(tmp_path, leased):
    root, cache = tmp_path / "root", tmp_path / "cache"
    store = analyzer_cache.GenerationStore(str(cache), lease_root=str(root))
    store.publish(_begin(store))
    with run_lock(str(root), 0) if leased else contextlib.nullcontext():
        slow = _begin(store)  # a run's Transform begins its generation, and takes its time
        for _ in range(3):  # meanwhile other runs (on Vertex, no lease) publish theirs
            time.sleep(0.001)
            store.publish(_begin(store))
        assert (Path(slow) / "entry").read_text() == "being written"
        store.publish(slow)  # ... and the slow run publishes in the end
        assert store.latest() == slow


def test_a_killed_runs_generation_goes_once_a_later_run_holds_the_root(tmp_path):
    root, cache = tmp_path / "root", tmp_path / "cache"
    store = analyzer_cache.GenerationStore(str(cache), lease_root=str(root))
    store.publish(_begin(store))
    killed = _begin(store)  # its run was killed before publishing
    time.sleep(0.001)
    with run_lock(str(root), 0):
        for _ in range(2):
            store.publish(_begin(store))
    assert not Path(killed).exists()
    # Without any lease it is kept for the grace period, then goes.
    killed = _begin(store)
    store.publish(_begin(store))
    store.publish(_begin(store))
    assert Path(killed).exists()
    store.publish(_begin(store), now=time.time() + lease.UNLEASED_GRACE_SECONDS + 1)
    assert not Path(killed).exists()


def test_a_broken_pointer_means_no_cache_not_a_failed_run(tmp_path):
    (tmp_path / analyzer_cache.LATEST).write_text("../../etc")
    assert analyzer_cache.GenerationStore(str(tmp_path)).latest() is None


def test_a_span_without_training_rows_is_analyzed_as_empty(windows, tmp_path):
    """A small span can hash every row into eval: its train files are empty, and the run still goes on."""
    _, examples = windows
    sparse = tmp_path / "examples"
    shutil.copytree(examples["first"].uri, sparse)
    prefix = span_example_gen.span_shards(examples["first"])[-1]["prefix"]
    for shard in (sparse / "Split-train").glob(f"{prefix}*"):
        with tf.io.TFRecordWriter(str(shard), options="GZIP"):
            pass
    copy = standard_artifacts.Examples()
    copy.uri = str(sparse)
    copy.split_names = examples["first"].split_names
    for name, value in examples["first"].mlmd_artifact.custom_properties.items():
        copy.mlmd_artifact.custom_properties[name].CopyFrom(value)
    graph = _transform(copy, tmp_path / "t", tmp_path / "cache", _features())
    assert _spans(graph, transform_component.ANALYZED_SPANS) == ["span-1", "span-2", "span-3"]
    assert _transformed(graph, copy)
