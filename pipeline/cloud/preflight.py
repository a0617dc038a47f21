"""What both targets' preflights share: a check's result line, running checks, printing them, stopping on FAIL."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc

from pipeline.errors import CommandFailed

# warn: worth knowing before paying for the run, but not a reason to stop it (submit goes on).
OK, FAIL, UNKNOWN, WARN = "ok", "FAIL", "?", "warn"
# What a check that cannot reach its API raises; it then reports "?", not FAIL.
API_ERRORS = (gexc.GoogleAPICallError, gexc.RetryError, requests.RequestException, auth_exc.TransportError)


@dataclasses.dataclass(frozen=True)
class Result:
    status: str
    check: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<4} {self.check}: {self.detail}" + (f"; fix: {self.fix}" if self.fix else "")


def run_checks(checks: Iterable[tuple[str, Callable[..., list[Result]]]], *args) -> list[Result]:
    """Each (name, check) called with `args`, in order; a check whose API can't be reached is "?" under its name."""
    results = []
    for name, check in checks:
        try:
            results.extend(check(*args))
        except API_ERRORS as e:
            results.append(Result(UNKNOWN, name, f"could not check: {short(e)}"))
    return results


def report(results: list[Result]) -> list[Result]:
    """Print one line per result; return the failed ones."""
    for result in results:
        print(result.line())
    return [r for r in results if r.status == FAIL]


def stop_if_failed(results: list[Result]) -> None:
    """Print the results; raise if any failed (submit and schedule create, on either target)."""
    failed = report(results)
    if failed:
        raise CommandFailed(f"preflight: {len(failed)} check(s) failed (FAIL above); fix them, "
                            "or pass --skip-preflight to go ahead anyway")


def short(e: Exception) -> str:
    message = getattr(e, "message", None) or str(e)
    return f"{type(e).__name__}: {message}"[:300]
