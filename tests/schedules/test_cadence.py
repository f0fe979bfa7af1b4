"""Tick arithmetic: ticks strictly increase, none is skipped, DST as docs/schedules.md says."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from chongming.errors import ScheduleInvalid
from chongming.schedules.cadence import Cadence, instant_of, make_cadence
from chongming.schedules.catch_up import SKIP_GRACE, plan_fires
from tests.tiers import examples

BERLIN = "Europe/Berlin"
ZONES = ("UTC", BERLIN, "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata")
#: Days the zones above change their clocks (2026, UTC noon): half the random
#: windows start up to 40 hours before one (most of them cross it).
DST_CHANGES = tuple(
    datetime(2026, month, day, 12, tzinfo=UTC)
    for month, day in ((3, 8), (3, 29), (4, 5), (10, 4), (10, 25), (11, 1))
)
CRONS = ("*/5 * * * *", "30 2 * * *", "0 * * * *", "15,45 1-3 * * *", "0 0 * * 1", "*/20 2 * * *")


def _walk(cadence: Cadence, start: datetime, count: int) -> list[datetime]:
    ticks, tick = [], start
    for _ in range(count):
        tick = cadence.next_after(tick)
        ticks.append(tick)
    return ticks


def _local(tick: datetime, zone: str) -> datetime:
    return tick.astimezone(ZoneInfo(zone)).replace(tzinfo=None)


def test_fall_back_fires_each_wall_time_once_at_its_first_occurrence() -> None:
    daily = make_cadence(cron="30 2 * * *", timezone=BERLIN)
    ticks = _walk(daily, datetime(2026, 10, 23, tzinfo=UTC), 4)
    assert [_local(t, BERLIN) for t in ticks] == [
        datetime(2026, 10, 23, 2, 30),
        datetime(2026, 10, 24, 2, 30),
        datetime(2026, 10, 25, 2, 30),  # the repeated hour: once, not twice
        datetime(2026, 10, 26, 2, 30),
    ]
    assert ticks[2] == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # CEST, the first pass
    every_half_hour = make_cadence(cron="*/30 * * * *", timezone=BERLIN)
    night = _walk(every_half_hour, datetime(2026, 10, 24, 23, 0, tzinfo=UTC), 6)
    walls = [_local(t, BERLIN) for t in night]
    assert len(set(walls)) == len(walls)  # no wall time fired twice
    assert datetime(2026, 10, 25, 2, 30) in walls
    assert datetime(2026, 10, 25, 3, 0) in walls


def test_spring_forward_fires_the_lost_hour_once_when_the_gap_ends() -> None:
    daily = make_cadence(cron="30 2 * * *", timezone=BERLIN)
    ticks = _walk(daily, datetime(2026, 3, 28, 12, tzinfo=UTC), 2)
    assert ticks[0] == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST: the gap's end
    assert _local(ticks[1], BERLIN) == datetime(2026, 3, 30, 2, 30)
    minutes = make_cadence(cron="*/20 * * * *", timezone=BERLIN)
    ticks = _walk(minutes, datetime(2026, 3, 29, 0, 30, tzinfo=UTC), 4)
    # 01:40 CET, then 02:00/02:20/02:40 (no such times) merge into 03:00 CEST once, then 03:20
    assert [_local(t, BERLIN) for t in ticks] == [
        datetime(2026, 3, 29, 1, 40),
        datetime(2026, 3, 29, 3, 0),
        datetime(2026, 3, 29, 3, 20),
        datetime(2026, 3, 29, 3, 40),
    ]


def test_every_counts_from_the_epoch_in_utc() -> None:
    cadence = make_cadence(every=timedelta(minutes=5), timezone=BERLIN)
    tick = cadence.next_after(datetime(2026, 3, 29, 0, 58, 7, tzinfo=UTC))
    assert tick == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert cadence.next_after(tick) == tick + timedelta(minutes=5)


@settings(max_examples=examples(200), deadline=None)
@given(
    cron=st.sampled_from(CRONS),
    zone=st.sampled_from(ZONES),
    start=st.one_of(
        st.datetimes(
            min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
        ),
        st.builds(
            lambda change, hours: change - timedelta(hours=hours),
            st.sampled_from(DST_CHANGES),
            st.floats(min_value=0, max_value=40),
        ),
    ),
)
def test_ticks_strictly_increase_and_none_is_skipped_in_a_window(
    cron: str, zone: str, start: datetime
) -> None:
    """Against an oracle: every matching wall time in the window maps to exactly one tick."""
    cadence = make_cadence(cron=cron, timezone=zone)
    end = start + timedelta(days=2)
    ticks = [cadence.next_after(start)]
    while ticks[-1] <= end:
        ticks.append(cadence.next_after(ticks[-1]))
    assert all(a < b for a, b in itertools.pairwise(ticks))
    inside = [t for t in ticks if t <= end]
    # The oracle: cronsim's naive wall-time matches over a wider window, each mapped
    # to its instant; those in (start, end] are exactly the ticks, once each.
    tz = ZoneInfo(zone)
    wall = (start - timedelta(hours=3)).astimezone(tz).replace(tzinfo=None)
    expected: set[datetime] = set()
    for match in CronSim(cron, wall):
        instant = instant_of(match, tz)
        if instant > end + timedelta(hours=3):
            break
        if start < instant <= end:
            expected.add(instant)
    assert inside == sorted(expected)
    walls = [_local(t, zone) for t in inside]
    assert len(set(walls)) == len(walls)  # a fall-back hour never doubles a wall time


@settings(max_examples=examples(200), deadline=None)
@given(
    seconds=st.integers(min_value=1, max_value=7200),
    down=st.integers(min_value=0, max_value=50_000),
    policy=st.sampled_from(("skip", "latest", "all")),
)
def test_a_plan_decides_each_due_tick_once(seconds: int, down: int, policy: str) -> None:
    cadence = make_cadence(every=timedelta(seconds=seconds))
    first = cadence.next_after(datetime(2026, 5, 1, tzinfo=UTC))
    now = first + timedelta(seconds=down)
    decided: list[datetime] = []
    next_fire = first
    while (plan := plan_fires(cadence, next_fire, now, policy)) is not None:
        assert plan.next_fire > plan.decided >= next_fire
        assert all(next_fire <= t <= now for t in plan.fires)
        assert list(plan.fires) == sorted(set(plan.fires))
        decided.extend(plan.fires)
        next_fire = plan.next_fire
    assert next_fire > now
    assert next_fire == cadence.next_after(now)
    due = down // seconds + 1
    if policy == "all":
        assert decided == [first + k * timedelta(seconds=seconds) for k in range(due)]
    else:
        newest = first + (due - 1) * timedelta(seconds=seconds)
        on_time = now - newest <= SKIP_GRACE
        assert decided == ([newest] if policy == "latest" or on_time else [])


def test_descriptions_in_words() -> None:
    assert make_cadence(every=timedelta(minutes=5)).describe() == "every 5 minutes"
    assert make_cadence(every=timedelta(seconds=1)).describe() == "every second"
    assert make_cadence(cron="*/5 * * * *").describe() == "every fifth minute of every hour"
    assert make_cadence(cron="30 2 * * *", timezone=BERLIN).describe() == (
        "at 02:30 every day (Europe/Berlin)"
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "not a cron"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "0 0 30 2 *"}, "cron"),  # Feb 30: never fires
        ({"cron": "0 0 31 4,6,9,11 *"}, "cron"),
        ({"cron": "*/5 * * * *", "timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"cron": "*/5 * * * *", "timezone": ""}, "timezone"),
        ({"every": timedelta(0)}, "every"),
        ({"every": timedelta(seconds=-5)}, "every"),
        ({"every": 5}, "every"),
        ({"cron": "* * * * *", "every": timedelta(seconds=5)}, "cron"),
        ({}, "cron"),
    ],
)
def test_bad_cadences_name_their_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ScheduleInvalid) as caught:
        make_cadence(**fields)
    assert caught.value.field == field
    assert field in str(caught.value)
