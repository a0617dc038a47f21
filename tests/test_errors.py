"""One error hierarchy: every exception class the project defines derives from ProjectError and is defined in
one of the three errors modules (trainer/, components/, pipeline/); the CLI's exit codes come from one table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline import errors

REPO = Path(__file__).resolve().parent.parent
ERROR_MODULES = {"trainer/errors.py", "components/errors.py", "pipeline/errors.py"}


def _exception_classes() -> dict[str, str]:
    """class name -> file, for every class of pipeline/, components/, trainer/ whose name says it is an error
    or that derives from a class so named."""
    found = {}
    for package in ("pipeline", "components", "trainer"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    bases = [ast.unparse(b) for b in node.bases]
                    if any(b.split(".")[-1].endswith(("Error", "Exception")) for b in bases) or \
                            node.name.endswith(("Error", "Exception")):
                        found[node.name] = path.relative_to(REPO).as_posix()
    return found


def test_every_error_class_is_defined_in_an_errors_module():
    # tf_keras metric subclasses (trainer/tasks.py _Rmse) are named after Keras's, not errors of ours.
    stray = {name: path for name, path in _exception_classes().items()
             if path not in ERROR_MODULES and name != "_Rmse"}
    assert not stray, f"error classes outside the errors modules: {stray}"


def test_every_error_derives_from_project_error():
    import components.errors
    import trainer.errors

    classes = [c for module in (errors, components.errors, trainer.errors) for c in vars(module).values()
               if isinstance(c, type) and issubclass(c, BaseException)]
    assert len(classes) > 20
    assert all(issubclass(c, errors.ProjectError) for c in classes), \
        [c.__name__ for c in classes if not issubclass(c, errors.ProjectError)]


@pytest.mark.parametrize("error, code", [
    (errors.ConfigError("x"), errors.EXIT_BAD_CONFIG),
    (errors.RunLocked("x"), errors.EXIT_BUSY),
    (errors.SpecError("x"), errors.EXIT_FAILED),
    (errors.SnapshotError("x"), errors.EXIT_FAILED),
    (errors.ConditionError("x"), None),  # a driver's failure inside a dry run, never raised to the CLI as such
])
def test_exit_codes_come_from_one_table(error, code):
    assert errors.exit_code_for(error) == code
