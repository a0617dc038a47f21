"""A task's `triggerPolicy.condition`, evaluated as the Vertex/KFP driver evaluates it before the task.

Source (kubeflow/pipelines at commit 7b70c7b, Aug 2026, the open-source
backend Vertex Pipelines shares its pipeline spec with):
- backend/src/v2/driver/container.go, `Container`: the driver resolves the
  task's inputs into an ExecutorInput, then, when
  `Task.GetTriggerPolicy().GetCondition()` is set, evaluates it with
  `expr.Condition(executorInput, condition)`; an evaluation error fails the
  driver (so the task), false means the task does not run.
- backend/src/v2/expression/expression.go, `Condition`: a CEL program over the
  ExecutorInput's fields (`inputs` is ExecutorInput.inputs), cel-go v0.30
  (go.mod); a non-bool result is an error.
- backend/src/v2/compiler/argocompiler/container.go, `containerExecutorTask`:
  the executor runs `when: <condition output> != false`, so a false condition
  leaves the task Skipped; dag.go, `depends`: every task waits on
  `<upstream>.Succeeded`, so a task after a skipped one does not run either.

TFX 1.16 writes the condition from a TFX `Cond` predicate
(tfx/orchestration/kubeflow/v2/compiler_utils.py, `placeholder_to_cel`):
comparisons (== < >), !, &&, || over literals (ints written as doubles,
'strings') and `inputs.artifacts['<key>'].artifacts[<i>].metadata['<name>']`
or `.uri`. That is the CEL this module evaluates; anything else is a SpecError
naming the task, never a guess. Artifact metadata is a protobuf Struct, so its
numbers are doubles, as are TFX's literals; cel-go compares int and double
numerically anyway (heterogeneous equality), and `==` between unlike types is false.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.vertex.dryrun.spec import SpecError, Task

_TOKEN = re.compile(r"\s*(?:(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|'(?P<string>[^'\\]*)'|"
                    r"(?P<ident>[A-Za-z_]\w*)|(?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].]))")


class ConditionError(ValueError):
    """The condition failed to evaluate (a missing key, a type mismatch): the driver, so the task, fails."""


def condition(task: Task) -> str:
    return task.spec.get("triggerPolicy", {}).get("condition", "")


def holds(task: Task, executor_input: dict[str, Any]) -> bool:
    """Whether the task runs: its condition over its ExecutorInput (JSON), True without one."""
    text = condition(task)
    if not text:
        return True
    parser = _Parser(text, task.field("triggerPolicy", "condition"), {"inputs": executor_input.get("inputs", {})})
    value = parser.expression()
    parser.end()
    if not isinstance(value, bool):
        raise ConditionError(f"{parser.field}: {text!r} is {value!r}, not a bool")
    return value


class _Parser:
    """Recursive descent over the tokens; evaluates as it parses (inputs are fixed)."""

    def __init__(self, text: str, field: str, variables: dict[str, Any]):
        self.text, self.field, self.variables = text, field, variables
        self.tokens: list[tuple[str, Any]] = []
        at = 0
        while at < len(text.rstrip()):
            match = _TOKEN.match(text, at)
            if match is None:
                raise SpecError(f"{field}: CEL {text!r} at {at}: not emulated by the dry run")
            kind = match.lastgroup
            raw = match.group(kind)
            self.tokens.append((kind, float(raw) if kind == "number" and not raw.lstrip("-").isdigit()
                                else int(raw) if kind == "number" else raw))
            at = match.end()
        self.at = 0

    def _peek(self) -> tuple[str, Any]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", None)

    def _take(self, op: str) -> bool:
        if self._peek() == ("op", op):
            self.at += 1
            return True
        return False

    def _expect(self, op: str) -> None:
        if not self._take(op):
            raise SpecError(f"{self.field}: CEL {self.text!r}: expected {op!r} at token {self.at}, "
                            f"got {self._peek()[1]!r}")

    def end(self) -> None:
        if self.at != len(self.tokens):
            raise SpecError(f"{self.field}: CEL {self.text!r}: unexpected {self._peek()[1]!r} at token {self.at}")

    def expression(self) -> Any:
        value = self._and()
        while self._take("||"):
            right = self._and()
            value = _bool(value, self) or _bool(right, self)
        return value

    def _and(self) -> Any:
        value = self._unary()
        while self._take("&&"):
            right = self._unary()
            value = _bool(value, self) and _bool(right, self)
        return value

    def _unary(self) -> Any:
        if self._take("!"):
            return not _bool(self._unary(), self)
        left = self._primary()
        for op in ("==", "!=", "<=", ">=", "<", ">"):
            if self._take(op):
                return _compare(op, left, self._primary(), self)
        return left

    def _primary(self) -> Any:
        kind, value = self._peek()
        if self._take("("):
            inner = self.expression()
            self._expect(")")
            return inner
        if kind in ("number", "string"):
            self.at += 1
            return value
        if kind == "ident":
            self.at += 1
            if value in ("true", "false"):
                return value == "true"
            if value not in self.variables:
                raise SpecError(f"{self.field}: CEL {self.text!r}: unknown variable {value!r}")
            return self._selectors(self.variables[value], value)
        raise SpecError(f"{self.field}: CEL {self.text!r}: unexpected {value!r} at token {self.at}")

    def _selectors(self, value: Any, path: str) -> Any:
        while True:
            if self._take("."):
                kind, name = self._peek()
                if kind != "ident":
                    raise SpecError(f"{self.field}: CEL {self.text!r}: a field name after {path}.")
                self.at += 1
                value, path = _get(value, name, f"{path}.{name}"), f"{path}.{name}"
            elif self._take("["):
                _, key = self._peek()
                self.at += 1
                self._expect("]")
                value, path = _get(value, key, f"{path}[{key!r}]"), f"{path}[{key!r}]"
            else:
                return value


def _get(value: Any, key: Any, path: str) -> Any:
    if isinstance(value, list) and isinstance(key, int) and not isinstance(key, bool):
        if not 0 <= key < len(value):
            raise ConditionError(f"{path}: index out of range (the list has {len(value)})")
        return value[key]
    if isinstance(value, dict):
        if key not in value:
            raise ConditionError(f"{path}: no such key (has {sorted(value)})")
        return value[key]
    raise ConditionError(f"{path}: cannot select {key!r} from {type(value).__name__}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _compare(op: str, left: Any, right: Any, parser: _Parser) -> bool:
    if op in ("==", "!="):
        same = (float(left) == float(right)) if _number(left) and _number(right) else (
            type(left) is type(right) and left == right)
        return same if op == "==" else not same
    if not ((_number(left) and _number(right)) or (type(left) is type(right) and isinstance(left, str))):
        raise ConditionError(f"{parser.field}: no such overload: {left!r} {op} {right!r}")
    return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]


def _bool(value: Any, parser: _Parser) -> bool:
    if not isinstance(value, bool):
        raise ConditionError(f"{parser.field}: {value!r} is not a bool operand of && || !")
    return value
