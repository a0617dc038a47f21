"""What a broken rule reports: the rule, the field and the task, and why."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Violation:
    rule: str
    field: str
    message: str
    task: str = ""   # named when the field is not under the task itself (its executor or component)

    def __str__(self) -> str:
        return f"[{self.rule}] {f'task {self.task}: ' if self.task else ''}{self.field}: {self.message}"
