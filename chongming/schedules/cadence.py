"""When a schedule fires: tick arithmetic, pure (no clock, no I/O).

A *cadence* is either a cron expression read in a time zone, or a fixed
interval (``every``). Its ticks are instants (aware UTC datetimes), strictly
increasing; :meth:`Cadence.next_after` gives the first tick after an instant.

Cron in a zone (the rule, written once):

- cronsim matches the expression against *wall-clock* times of the zone; it
  is given naive local datetimes only. Its own time-zone handling covers
  fixed-time jobs (Debian cron's quirks) but iterates wildcard jobs
  (``*/5 * * * *``) with aware arithmetic that goes backwards across a
  spring-forward gap, so chongming maps wall times to instants itself:
- a wall time that exists once is that instant;
- a wall time shown twice (the fall-back hour) fires once, at its first
  occurrence: the repeated hour is not doubled;
- a wall time that does not exist (the spring-forward gap) fires at the
  instant the gap ends, once, however many matching wall times the gap
  swallowed: the spring-forward hour is not lost.

The mapping is non-decreasing in wall time, and equal instants are merged,
so the ticks are strictly increasing in UTC and each matching wall time is
accounted for exactly once.

``every``: ticks at ``epoch + k * every`` in UTC (whole multiples of the
interval since 1970-01-01T00:00Z); time zones do not apply.

Cost: ``next_after`` is one cronsim step per matching wall time, plus at most
the matches inside a repeated hour (skipped) and a 20-step search for a gap's
end. Cron has minute resolution (or second, with the 6-field form).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from chongming.errors import ScheduleInvalid

__all__ = [
    "CATCH_UP_POLICIES",
    "MAX_EVERY",
    "MIN_EVERY",
    "Cadence",
    "check_catch_up",
    "check_zone",
    "describe_every",
    "make_cadence",
]

#: What a schedule does with ticks that came due while no scheduler ran.
CATCH_UP_POLICIES = ("skip", "latest", "all")
#: The shortest interval (the loop's resolution is far coarser than this).
MIN_EVERY = timedelta(milliseconds=100)
#: The longest interval (beyond it, nobody is waiting for the tick).
MAX_EVERY = timedelta(days=3660)
#: A cron expression's longest text (cron fields are short by nature).
MAX_CRON = 200
_GAP_SEARCH_STEPS = 24
_NEVER = "names a date that never comes (e.g. Feb 30): it never fires"
#: Where ``every`` series are counted from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_zone(timezone: object) -> ZoneInfo:
    """The IANA zone named ``timezone``, or :class:`ScheduleInvalid` naming the field."""
    if not isinstance(timezone, str) or not timezone:
        raise ScheduleInvalid("timezone", f"must be an IANA zone name, got {timezone!r}")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleInvalid(
            "timezone", f"unknown time zone {timezone!r}; use an IANA name like 'Europe/Berlin'"
        ) from None


def check_catch_up(policy: object) -> str:
    if policy not in CATCH_UP_POLICIES:
        raise ScheduleInvalid(
            "catch_up", f"must be one of {', '.join(CATCH_UP_POLICIES)}; got {policy!r}"
        )
    return str(policy)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Cadence:
    """A checked cron expression in a zone, or an interval (exactly one of the two)."""

    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def next_after(self, instant: datetime, *, start: datetime | None = None) -> datetime:
        """The first tick strictly after ``instant`` (aware).

        ``start``: for ``every``, the tick the series is counted from (a tick
        itself); without it, the Unix epoch, so ``every=timedelta(minutes=5)``
        fires at :00, :05, ... on every node alike.
        """
        instant = _aware(instant)
        if self.every is not None:
            origin = EPOCH if start is None else _aware(start)
            if instant < origin:
                return origin
            steps = (instant - origin) // self.every + 1
            return origin + steps * self.every
        assert self.cron is not None
        zone = self.zone
        wall = instant.astimezone(zone).replace(tzinfo=None)
        for match in CronSim(self.cron, wall):
            tick = instant_of(match, zone)
            if tick > instant:
                return tick
        raise StopIteration  # pragma: no cover - make_cadence refused a cron that never fires

    def ticks_between(
        self, first: datetime, until: datetime, *, limit: int
    ) -> tuple[list[datetime], bool]:
        """Ticks from ``first`` (a tick) to ``until`` inclusive, at most ``limit``; cut short?"""
        found: list[datetime] = []
        tick = _aware(first)
        while tick <= until:
            if len(found) == limit:
                return found, True
            found.append(tick)
            tick = self.next_after(tick, start=first)
        return found, False

    def last_at_or_before(self, first: datetime, until: datetime) -> datetime | None:
        """The latest tick in ``[first, until]`` without walking every tick since ``first``."""
        first, until = _aware(first), _aware(until)
        if until < first:
            return None
        if self.every is not None:
            return first + ((until - first) // self.every) * self.every
        back = timedelta(minutes=2)
        while True:
            since = max(first, until - back)
            tick = since if since == first else self.next_after(since - timedelta(microseconds=1))
            last = None
            while tick <= until:
                last = tick
                tick = self.next_after(tick)
            if last is not None or since == first:
                return last
            back *= 16

    def describe(self) -> str:
        """The cadence in words: ``every 5 minutes``, ``at 02:30 every day (Europe/Berlin)``."""
        if self.every is not None:
            return describe_every(self.every)
        assert self.cron is not None
        words = CronSim(self.cron, datetime(2000, 1, 1)).explain()
        words = words[:1].lower() + words[1:]
        return words if self.timezone == "UTC" else f"{words} ({self.timezone})"


def make_cadence(*, cron: object = None, every: object = None, timezone: object = "UTC") -> Cadence:
    """A checked :class:`Cadence`; :class:`ScheduleInvalid` names the field that is wrong."""
    if cron is None and every is None:
        raise ScheduleInvalid("cron", "give cron='...' or every=timedelta(...), not neither")
    if cron is not None and every is not None:
        raise ScheduleInvalid("cron", "give cron= or every=, not both")
    check_zone(timezone)
    if every is not None:
        if not isinstance(every, timedelta):
            raise ScheduleInvalid("every", f"must be a datetime.timedelta, got {every!r}")
        if every <= timedelta(0):
            raise ScheduleInvalid("every", f"must be positive, got {every}")
        if not MIN_EVERY <= every <= MAX_EVERY:
            raise ScheduleInvalid("every", f"must be from {MIN_EVERY} to {MAX_EVERY}, got {every}")
        return Cadence(every=every, timezone=str(timezone))
    if not isinstance(cron, str) or not cron.strip() or len(cron) > MAX_CRON:
        raise ScheduleInvalid("cron", f"must be a cron expression of 5 or 6 fields, got {cron!r}")
    expression = " ".join(cron.split())
    try:
        next(CronSim(expression, datetime(2000, 1, 1)))
    except CronSimError as error:
        if _days_exist_in_no_month(expression, str(error)):
            raise ScheduleInvalid(
                "cron",
                f"{expression!r} names a date that never comes (e.g. Feb 30): it never fires",
            ) from None
        raise ScheduleInvalid("cron", f"{expression!r} does not parse: {error}") from None
    except StopIteration:
        raise ScheduleInvalid("cron", f"{expression!r} {_NEVER}") from None
    return Cadence(cron=expression, timezone=str(timezone))


def _days_exist_in_no_month(expression: str, error: str) -> bool:
    """cronsim's "Bad day-of-month" for well-formed days (1-31) that no chosen month has."""
    fields = expression.split()
    day = fields[-3] if len(fields) in (5, 6) else ""
    numbers = day.replace(",", " ").replace("-", " ").split()
    return (
        error == "Bad day-of-month"
        and bool(numbers)
        and all(n.isdigit() and 1 <= int(n) <= 31 for n in numbers)
    )


def describe_every(every: timedelta) -> str:
    seconds = every.total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"every {unit}" if count == 1 else f"every {count} {unit}s"
    return f"every {seconds:g} seconds"


def instant_of(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant a naive wall time of ``zone`` fires at (see the module docstring)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first  # it exists; fold=0 is its first occurrence
    # In a gap: fold=0 reads it with the offset before (an instant after the
    # transition), fold=1 with the offset after (an instant before it).
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    high = first
    for _ in range(_GAP_SEARCH_STEPS):  # the transition: first instant showing a wall > ``wall``
        if high - low <= timedelta(seconds=1):
            break
        middle = low + (high - low) / 2
        if middle.astimezone(zone).replace(tzinfo=None) > wall:
            high = middle
        else:
            low = middle
    whole = low.replace(microsecond=0) + timedelta(seconds=1)  # transitions fall on seconds
    return whole if low < whole <= high else high


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleInvalid("time", "must be an aware datetime (a naive one names no instant)")
    return value.astimezone(UTC)
