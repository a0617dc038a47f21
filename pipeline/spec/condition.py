"""A task's `triggerPolicy.condition`: parsed up front, evaluated as the KFP driver evaluates it.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Union

from pipeline.errors import ConditionError, SpecError

_TOKEN = re.compile(r"\s*(?:(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|'(?P<string>[^'\\]*)'|"
                    r"(?P<ident>[A-Za-z_]\w*)|(?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].]))")
_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
# ExecutorInput.inputs' proto field names (CEL) -> their JSON names in the ExecutorInput the driver builds.
_JSON_NAMES = {"parameter_values": "parameterValues"}


@dataclasses.dataclass(frozen=True)
class Literal:
    value: Any


@dataclasses.dataclass(frozen=True)
class Path:
    """`inputs` and the selectors after it: field names (str) and indexes/keys ([int] or ['str'])."""
    selectors: tuple[tuple[str, Any], ...]   # ("field", name) | ("index", key)

    def input_ref(self) -> tuple[str, str] | None:
        """('artifacts' | 'parameter_values', key) when the path starts like inputs.artifacts['key']."""
        if len(self.selectors) >= 2 and self.selectors[0][0] == "field" and self.selectors[1][0] == "index":
            return self.selectors[0][1], self.selectors[1][1]
        return None

    def text(self) -> str:
        return "inputs" + "".join(f".{v}" if k == "field" else f"[{v!r}]" for k, v in self.selectors)


@dataclasses.dataclass(frozen=True)
class Not:
    operand: "Node"


@dataclasses.dataclass(frozen=True)
class Logical:
    op: str          # && or ||
    left: "Node"
    right: "Node"


@dataclasses.dataclass(frozen=True)
class Compare:
    op: str
    left: "Node"
    right: "Node"


@dataclasses.dataclass(frozen=True)
class Call:
    """A CEL conversion function: `int(x)`, which the KFP SDK writes around a NUMBER_INTEGER parameter
    (sdk/python/kfp/compiler/pipeline_spec_builder.py, `_resolve_condition_operands`)."""
    function: str
    argument: "Node"


# The functions the conditions we compile use; any other is refused (fail closed).
FUNCTIONS = ("int",)

Node = Union[Literal, Path, Not, Logical, Compare, Call]


def parse(text: str, field: str) -> Node:
    """The condition's tree; a SpecError naming `field` if it is not the CEL TFX writes."""
    parser = _Parser(text, field)
    node = parser.expression()
    parser.end()
    return node


def paths(node: Node) -> list[Path]:
    """Every input path the condition reads."""
    if isinstance(node, Path):
        return [node]
    if isinstance(node, Not):
        return paths(node.operand)
    if isinstance(node, Call):
        return paths(node.argument)
    if isinstance(node, (Logical, Compare)):
        return paths(node.left) + paths(node.right)
    return []


def evaluate(node: Node, executor_input: dict[str, Any], field: str) -> bool:
    """Whether the task runs, over its ExecutorInput (JSON); ConditionError when the driver would fail."""
    value = _eval(node, {"inputs": executor_input.get("inputs", {})})
    if not isinstance(value, bool):
        raise ConditionError(f"{field}: the condition is {value!r}, not a bool")
    return value


def _eval(node: Node, variables: dict[str, Any]) -> Any:
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Path):
        value, where = variables["inputs"], "inputs"
        for kind, key in node.selectors:
            where += f".{key}" if kind == "field" else f"[{key!r}]"
            value = _get(value, _JSON_NAMES.get(key, key) if kind == "field" else key, where)
        return value
    if isinstance(node, Not):
        return not _bool(_eval(node.operand, variables))
    if isinstance(node, Logical):
        return _logical(node, variables)
    if isinstance(node, Call):
        return _int(_eval(node.argument, variables))
    return _compare(node.op, _eval(node.left, variables), _eval(node.right, variables))


def _logical(node: Logical, variables: dict[str, Any]) -> bool:
    decisive = node.op == "||"  # the operand value that decides the result alone
    outcomes = []
    for side in (node.left, node.right):
        try:
            value = _bool(_eval(side, variables))
        except ConditionError as e:
            outcomes.append(e)
            continue
        if value is decisive:
            return decisive
        outcomes.append(value)
    errors = [o for o in outcomes if isinstance(o, ConditionError)]
    if errors:
        raise errors[0]
    return not decisive


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


def _int(value: Any) -> int:
    """CEL's int(): a double is truncated toward zero, a string parsed; anything else has no overload."""
    if _number(value):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ConditionError(f"int({value!r}): not an integer") from None
    raise ConditionError(f"no such overload: int({value!r})")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _compare(op: str, left: Any, right: Any) -> bool:
    if op in ("==", "!="):
        same = (float(left) == float(right)) if _number(left) and _number(right) else (
            type(left) is type(right) and left == right)
        return same if op == "==" else not same
    if not ((_number(left) and _number(right)) or (type(left) is type(right) and isinstance(left, str))):
        raise ConditionError(f"no such overload: {left!r} {op} {right!r}")
    return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConditionError(f"{value!r} is not a bool operand of && || !")
    return value


class _Parser:
    """Recursive descent over the tokens, building the tree (nothing is evaluated here)."""

    def __init__(self, text: str, field: str):
        self.text, self.field = text, field
        self.tokens: list[tuple[str, Any]] = []
        at = 0
        while at < len(text.rstrip()):
            match = _TOKEN.match(text, at)
            if match is None:
                self._refuse(f"at {at}: not the CEL TFX writes")
            kind = match.lastgroup
            raw = match.group(kind)
            self.tokens.append((kind, float(raw) if kind == "number" and not raw.lstrip("-").isdigit()
                                else int(raw) if kind == "number" else raw))
            at = match.end()
        self.at = 0

    def _refuse(self, why: str):
        raise SpecError(f"{self.field}: CEL {self.text!r} {why}")

    def _peek(self) -> tuple[str, Any]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", None)

    def _take(self, op: str) -> bool:
        if self._peek() == ("op", op):
            self.at += 1
            return True
        return False

    def _expect(self, op: str) -> None:
        if not self._take(op):
            self._refuse(f": expected {op!r} at token {self.at}, got {self._peek()[1]!r}")

    def end(self) -> None:
        if self.at != len(self.tokens):
            self._refuse(f": unexpected {self._peek()[1]!r} at token {self.at}")

    def expression(self) -> Node:
        node = self._and()
        while self._take("||"):
            node = Logical("||", node, self._and())
        return node

    def _and(self) -> Node:
        node = self._unary()
        while self._take("&&"):
            node = Logical("&&", node, self._unary())
        return node

    def _unary(self) -> Node:
        if self._take("!"):
            return Not(self._unary())
        left = self._primary()
        for op in _COMPARISONS:
            if self._take(op):
                return Compare(op, left, self._primary())
        return left

    def _primary(self) -> Node:
        kind, value = self._peek()
        if self._take("("):
            inner = self.expression()
            self._expect(")")
            return inner
        if kind in ("number", "string"):
            self.at += 1
            return Literal(value)
        if kind == "ident":
            self.at += 1
            if value in ("true", "false"):
                return Literal(value == "true")
            if value in FUNCTIONS and self._take("("):
                argument = self.expression()
                self._expect(")")
                return Call(value, argument)
            if value != "inputs":
                self._refuse(f": unknown variable {value!r} (only `inputs` of the ExecutorInput)")
            return self._selectors()
        self._refuse(f": unexpected {value!r} at token {self.at}")

    def _selectors(self) -> Path:
        selectors = []
        while True:
            if self._take("."):
                kind, name = self._peek()
                if kind != "ident":
                    self._refuse(f": a field name expected after '.' at token {self.at}")
                self.at += 1
                selectors.append(("field", name))
            elif self._take("["):
                kind, key = self._peek()
                if kind not in ("number", "string") or isinstance(key, float):
                    self._refuse(f": an index or a 'key' expected in [] at token {self.at}")
                self.at += 1
                self._expect("]")
                selectors.append(("index", key))
            else:
                return Path(tuple(selectors))
