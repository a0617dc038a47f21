"""Our model of Vertex's cache key reproduces the KFP backend's own fingerprints.

The expected hashes are the ones kubeflow/pipelines asserts in
backend/src/v2/cacheutils/cache_test.go (TestGenerateFingerPrint), so a
change to how we build or hash the key fails here before it misleads a
cache test.
"""

from pipeline.spec.cache_rule import cache_key, caching_enabled, fingerprint

MODEL_SCHEMA = ("title: kfp.Model\ntype: object\nproperties:\n  framework:\n    type: string\n"
                "  framework_version:\n    type: string\n")


def test_fingerprint_matches_kfp_backend():
    key = cache_key(
        input_artifact_names={"dataset_one": ["1"], "dataset_two": ["2"]},
        input_parameter_values={"message": "Some string value", "num_steps": 5.0},
        output_artifacts={
            "model": {"name": "model", "type": {"instanceSchema": MODEL_SCHEMA}, "metadata": {"name": "model"},
                      "uri": "gs://wiped/by/the/backend"},
            "metrics": {"name": "metrics", "type": {"schemaTitle": "kfp.Metrics"}, "metadata": {"name": "metrics"}}},
        output_parameter_types={"output_parameter_one": "STRING", "output_parameter_two": "INT"},
        image="python:3.11", command=["sh", "ec"], args=["test"])
    assert fingerprint(key) == "b498530c9016917298999ec0b01f364a180f8a3862bea0fa672a383ca3f22e4e"


def test_fingerprint_of_a_sparse_key_matches_kfp_backend():
    key = cache_key(input_artifact_names={"dataset": ["10"]}, input_parameter_values={}, output_artifacts={},
                    output_parameter_types={"output_parameter": "DOUBLE"},
                    image="python:3.11", command=["sh"], args=["ec", "run"])
    assert fingerprint(key) == "3d9a2a778fa3174c6cfc6e639c507c265b5f21ef6e5b1dd70b236462cc6da464"


def test_new_upstream_artifact_changes_the_key():
    def key(name):
        return fingerprint(cache_key(input_artifact_names={"examples": [name]}, input_parameter_values={},
                                     output_artifacts={}, output_parameter_types={}, image="i", command=["c"],
                                     args=[]))
    assert key("projects/p/artifacts/1") != key("projects/p/artifacts/2")


def test_run_level_option_overrides_task_option():
    task = {"cachingOptions": {"enableCache": True}}
    assert caching_enabled(task) and not caching_enabled(task, False)
    assert not caching_enabled({}) and caching_enabled({}, True)
