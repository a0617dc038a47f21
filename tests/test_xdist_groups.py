"""`make test`'s two workers: the groups tests/conftest.py hands them, and the pytest-xdist
internal its scheduler relies on (a change there would silently make the shared runs twice)."""

import inspect

from xdist.scheduler import LoadScopeScheduling

from tests.conftest import KUBEFLOW_PACKAGE_GROUP, SHARED_RUNS_GROUP, group_of


def test_the_modules_sharing_runs_are_one_group_and_every_other_module_its_own():
    assert group_of("tests/test_gates.py::test_weak_model_is_not_pushed") == SHARED_RUNS_GROUP
    assert group_of("tests/test_report.py::test_every_run_writes_a_self_contained_report") == SHARED_RUNS_GROUP
    assert group_of("tests/test_trainer.py::test_jit[tpu-bfloat16]") == "tests/test_trainer.py"
    assert group_of("tests/test_kubeflow_jobs.py::test_submit_sends_a_run_of_the_compiled_spec") == \
        group_of("tests/test_kubeflow_launcher.py::test_every_task_runs_our_entrypoint_with_its_inputs_spec") == \
        KUBEFLOW_PACKAGE_GROUP


def test_xdist_still_splits_its_work_by_the_scope_our_scheduler_overrides():
    # conftest's GroupScheduling overrides LoadScopeScheduling._split_scope (pytest-xdist 3.8.0).
    assert "self._split_scope(nodeid)" in inspect.getsource(LoadScopeScheduling.schedule)
