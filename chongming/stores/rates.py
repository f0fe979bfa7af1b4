"""Records of cluster-wide rate limits: how many tasks with a tag may *start* per period.

A *rate limit* (``vendor-api: 10/s``) caps starts, where a cluster limit
(:mod:`chongming.stores.limits`) caps how many run at once. Every node on one
store asks the store for each start (``take_rate_grants``), so one worker or
ten together never start more than the limit allows.

The decision is GCRA (the generic cell rate algorithm): the store keeps one
row per limit and key holding its *theoretical arrival time* (TAT), the
earliest time the limit is back to idle. With ``interval = per / rate`` and
``tolerance = (burst - 1) * interval``, a start at ``now`` is allowed while
``TAT - tolerance <= now``, and each start moves the TAT to
``max(TAT, now) + interval``. So:

- after an idle spell up to ``burst`` starts go at once, then one every
  ``interval``;
- in any window of one ``per``, at most ``rate + burst - 1`` starts are
  granted (``rate`` with the default ``burst=1``: starts evenly spaced).

One row update per decision, in one transaction: the answer for ``want``
starts is how many of them may go now (:func:`grant_starts`), and when the
next one may (:class:`RateGrant.retry_after`), so a worker that got fewer
than it asked for sleeps exactly that long instead of polling.

Written as text: ``"10/s"``, ``"600/min"``, ``"5/h burst 20"``
(:func:`parse_rate`), or as a :class:`RateLimit`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import timedelta

from chongming.errors import PayloadError
from chongming.stores.checks import check_text

__all__ = [
    "MAX_BURST",
    "MAX_RATE_KEY",
    "MAX_RATE_PER_SECOND",
    "RateGrant",
    "RateLimit",
    "check_grant_request",
    "check_rate_limit",
    "check_rate_name",
    "grant_starts",
    "parse_rate",
]

#: The fastest limit a store keeps: starts per second (beyond it a limit limits nothing).
MAX_RATE_PER_SECOND = 10_000
#: The largest burst a store keeps.
MAX_BURST = 100_000
#: Longest key of a keyed limit (characters).
MAX_RATE_KEY = 200
#: The longest period: one day (a limit per week is a schedule, not a rate).
MAX_PERIOD = timedelta(days=1)

_UNITS = {"s": timedelta(seconds=1), "min": timedelta(minutes=1), "h": timedelta(hours=1)}
_TEXT = re.compile(
    r"^\s*(?P<rate>\S+?)\s*/\s*(?P<unit>[A-Za-z]+)\s*(?:burst\s+(?P<burst>\S+))?\s*$"
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """At most ``rate`` starts per ``per``, up to ``burst`` at once after an idle spell.

    ``burst=1`` (the default) spaces starts evenly: one every ``per / rate``.
    Checked when made (:class:`PayloadError` naming the field).
    """

    rate: int
    per: timedelta = timedelta(seconds=1)
    burst: int = 1

    def __post_init__(self) -> None:
        check_rate_limit(self)

    @property
    def interval(self) -> float:
        """Seconds between two steady starts."""
        return self.per.total_seconds() / self.rate

    @property
    def tolerance(self) -> float:
        """Seconds a start may come early (what lets a burst through)."""
        return (self.burst - 1) * self.interval

    def __str__(self) -> str:
        unit = next((u for u, length in _UNITS.items() if length == self.per), None)
        text = f"{self.rate}/{unit}" if unit else f"{self.rate} per {self.per.total_seconds()}s"
        return text if self.burst == 1 else f"{text} burst {self.burst}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RateGrant:
    """What one decision of the store said: ``granted`` starts may go now.

    ``retry_after``: seconds (by the store's clock) until the next start
    would be granted; ``0.0`` when one would be granted right away.
    """

    granted: int
    retry_after: float


def parse_rate(text: object, *, field: str = "rate limit") -> RateLimit:
    """``"10/s"``, ``"600/min"``, ``"5/h burst 20"`` as a :class:`RateLimit`.

    A :class:`RateLimit` is returned as it is. Anything else is refused with
    :class:`PayloadError` naming ``field``: an unparseable text, an unknown
    unit (``s``, ``min``, ``h``), a rate that is not a whole number from 1,
    a rate over :data:`MAX_RATE_PER_SECOND` per second, a burst below 1.
    """
    if isinstance(text, RateLimit):
        return text
    if not isinstance(text, str):
        raise PayloadError(field, f"must be a text like '10/s' or a RateLimit, got {text!r}")
    found = _TEXT.match(text)
    if found is None:
        raise PayloadError(
            field, f"cannot read {text!r}: write it as '10/s', '600/min' or '5/h burst 20'"
        )
    unit = found["unit"]
    if unit not in _UNITS:
        raise PayloadError(field, f"unknown unit {unit!r} in {text!r}: use s, min or h")
    rate = _whole(found["rate"], field, "rate", text)
    burst = 1 if found["burst"] is None else _whole(found["burst"], field, "burst", text)
    try:
        return RateLimit(rate=rate, per=_UNITS[unit], burst=burst)
    except PayloadError as error:
        raise PayloadError(field, f"the {error.what} {error.reason} (in {text!r})") from None


def _whole(number: str, field: str, what: str, text: str) -> int:
    try:
        value = float(number)
    except ValueError:
        raise PayloadError(field, f"the {what} {number!r} in {text!r} is not a number") from None
    if not math.isfinite(value) or value != int(value):
        raise PayloadError(field, f"the {what} in {text!r} must be a whole number, got {number!r}")
    return int(value)


def check_rate_limit(limit: object) -> RateLimit:
    """A :class:`RateLimit` whose fields make a limit (see :func:`parse_rate`)."""
    if not isinstance(limit, RateLimit):
        raise PayloadError("rate limit", f"must be a RateLimit, got {type(limit).__name__}")
    rate, per, burst = limit.rate, limit.per, limit.burst
    if isinstance(rate, bool) or not isinstance(rate, int) or rate < 1:
        raise PayloadError("rate", f"must be a whole number of starts >= 1, got {rate!r}")
    if not isinstance(per, timedelta) or not timedelta(0) < per <= MAX_PERIOD:
        raise PayloadError("per", f"must be a timedelta above 0 and at most one day, got {per!r}")
    if rate / per.total_seconds() > MAX_RATE_PER_SECOND:
        raise PayloadError(
            "rate", f"{rate} per {per.total_seconds()}s is over {MAX_RATE_PER_SECOND} starts/s"
        )
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= MAX_BURST:
        raise PayloadError("burst", f"must be a whole number from 1 to {MAX_BURST}, got {burst!r}")
    return limit


def check_rate_name(name: object) -> str:
    if not isinstance(name, str):
        raise PayloadError("rate limit name", f"must be a string, got {type(name).__name__}")
    if not name or len(name) > MAX_RATE_KEY or not name.isprintable():
        raise PayloadError("rate limit name", f"must have 1 to {MAX_RATE_KEY} printable characters")
    check_text(name, "rate limit name")
    return name


def check_grant_request(name: object, key: object, want: object) -> None:
    """The arguments of ``TaskStore.take_rate_grants``, refused alike by every backend."""
    check_rate_name(name)
    if not isinstance(key, str) or len(key) > MAX_RATE_KEY or not key.isprintable():
        raise PayloadError(
            "key", f"must be a printable string of at most {MAX_RATE_KEY} characters"
        )
    check_text(key, "key")
    if isinstance(want, bool) or not isinstance(want, int) or not 1 <= want <= MAX_BURST:
        raise PayloadError("want", f"must be a whole number from 1 to {MAX_BURST}, got {want!r}")


def grant_starts(
    *, tat: float | None, now: float, limit: RateLimit, want: int
) -> tuple[int, float, float]:
    """One GCRA decision: ``(granted, new_tat, retry_after)``; the rule every backend applies.

    ``tat`` is the stored theoretical arrival time (``None``: never used),
    ``now`` the store's clock, both in seconds. ``granted`` is at most
    ``want``; the row keeps ``new_tat``; ``retry_after`` is how long until
    one more start would be granted.
    """
    interval, tolerance = limit.interval, limit.tolerance
    base = now if tat is None else max(tat, now)
    # A tiny slack against float rounding: a start exactly on time is on time.
    room = math.floor((now + tolerance - base) / interval + 1e-9) + 1
    granted = max(0, min(want, room))
    new_tat = base + granted * interval
    retry_after = max(0.0, new_tat - tolerance - now)
    return granted, new_tat, retry_after
