"""Schedule times checked before any request, for both targets: cron expressions and ISO 8601 start/end times."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pipeline.errors import ConfigError

# (name, lowest, highest, names accepted instead of numbers)
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_FIELDS = [("minute", 0, 59, []), ("hour", 0, 23, []), ("day of month", 1, 31, []),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS)]
_ITEM_RE = re.compile(r"^(\*|(?P<lo>[0-9A-Za-z]+)(-(?P<hi>[0-9A-Za-z]+))?)(/(?P<step>[0-9]+))?$")


def validate_cron(cron: str | None) -> str:
    """Vertex's cron: five unix fields, optionally prefixed by TZ= or CRON_TZ= and an IANA zone."""
    if not cron or not cron.strip():
        raise ConfigError("schedule create needs --cron, e.g. --cron '0 3 * * 1' (03:00 UTC every Monday)")
    text = cron.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        zone, _, text = text.partition(" ")
        zone = zone.split("=", 1)[1]
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"--cron {cron!r}: unknown time zone {zone!r} (use an IANA name like Europe/Berlin)"
                              ) from None
    fields = text.split()
    if len(fields) != 5:
        raise ConfigError(f"--cron {cron!r}: expected 5 fields (minute hour day-of-month month day-of-week), "
                          f"got {len(fields)}")
    for value, (name, lo, hi, names) in zip(fields, _FIELDS):
        for item in value.split(","):
            _check_item(cron, item, name, lo, hi, names)
    return cron.strip()


def _check_item(cron: str, item: str, name: str, lo: int, hi: int, names: list[str]) -> None:
    m = _ITEM_RE.match(item)
    if not m:
        raise ConfigError(f"--cron {cron!r}: {name} item {item!r} is not *, N, N-M or */S")

    def number(token: str) -> int:
        if token.upper() in names:
            return names.index(token.upper()) + lo
        if not token.isdigit() or not lo <= int(token) <= hi:
            raise ConfigError(f"--cron {cron!r}: {name} {token!r} is outside {lo}-{hi}")
        return int(token)

    if m["lo"] is not None:
        first = number(m["lo"])
        if m["hi"] is not None and number(m["hi"]) < first:
            raise ConfigError(f"--cron {cron!r}: {name} range {item!r} runs backwards")
    if m["step"] is not None and not 1 <= int(m["step"]) <= hi:
        raise ConfigError(f"--cron {cron!r}: {name} step in {item!r} must be 1-{hi}")


def parse_time(value: str | None, flag: str) -> str | None:
    """An ISO 8601 time with zone (or Z) as the RFC 3339 UTC string Vertex expects."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected ISO 8601 like 2027-01-31T06:00:00Z") from None
    if when.tzinfo is None:
        raise ConfigError(f"{flag} {value!r}: give a time zone (Z or +01:00) so the time is unambiguous")
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
