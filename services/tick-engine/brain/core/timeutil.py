"""Time parsing. Pure: the current instant is always a parameter."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DATE_IN_TEXT = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


#: The years a date in a vault or a bundle may fall in; one outside (``9999-12-31``, a typo) is
#: reported and not used: adding a gap or a half-life to it would overflow.
MIN_YEAR, MAX_YEAR = 1970, 2999
EARLIEST = datetime(MIN_YEAR, 1, 1, tzinfo=UTC)
_AFTER_LATEST = datetime(MAX_YEAR + 1, 1, 1, tzinfo=UTC)


class TimeParseError(ValueError):
    pass


def in_usable_years(instant: datetime) -> bool:
    """``instant`` (aware) falls in :data:`MIN_YEAR`-:data:`MAX_YEAR`, UTC."""
    return EARLIEST <= instant < _AFTER_LATEST


def parse_instant(value: object) -> datetime | None:
    """An aware UTC datetime from an ISO string, date or datetime; None when unreadable.

    Naive values are taken as UTC; a bare date is midnight UTC.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def require_instant(value: str, *, what: str = "time") -> datetime:
    parsed = parse_instant(value)
    if parsed is None:
        raise TimeParseError(f"{what}: {value!r} is not an ISO-8601 date or time")
    return parsed


def parse_point(value: str, now: datetime, *, what: str = "time") -> datetime:
    """``26h`` / ``7d`` / ``90m`` before ``now``, or an absolute ISO-8601 instant."""
    match = _RELATIVE.match(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2).lower()
        return now - timedelta(**{_UNITS[unit]: amount})
    return require_instant(value, what=what)


def date_in_text(text: str) -> datetime | None:
    """The first plausible YYYY-MM-DD in ``text`` (a cluster_id or file name)."""
    for match in _DATE_IN_TEXT.finditer(text):
        try:
            return datetime(int(match.group(1)), int(match.group(2)), int(match.group(3)), tzinfo=UTC)
        except ValueError:
            continue
    return None


def iso(instant: datetime) -> str:
    """Canonical UTC form used everywhere we write a time: ``2026-11-21T19:00:00Z``."""
    return instant.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def wall_clock() -> datetime:
    """The only call to the real clock; used at the CLI edge when no --now is given."""
    return datetime.now(UTC)
