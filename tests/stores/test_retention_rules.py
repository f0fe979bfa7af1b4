"""Retention as data: ages that parse, periods the idempotency window allows, the rules built."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming.errors import ConfigurationError, InvalidRetention, RetentionTooShort
from chongming.state.status import TERMINAL_STATUSES, TaskStatus
from chongming.stores.retention import (
    FAILED_STATUSES,
    PruneSelection,
    Retention,
    check_batch,
    check_selection,
    format_age,
    parse_age,
    parse_statuses,
    selections,
)

_NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("7d", timedelta(days=7)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("90s", timedelta(seconds=90)),
        ("2w", timedelta(weeks=2)),
        (" 1.5D ", timedelta(hours=36)),
    ],
)
def test_ages_parse_and_print_back(text: str, period: timedelta) -> None:
    assert parse_age(text) == period
    assert parse_age(format_age(period)) == period


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "does not parse"),
        ("7", "does not parse"),
        ("7 days", "does not parse"),
        ("d", "does not parse"),
        ("-1d", "is negative"),
        ("0d", "is not positive"),
        ("1e9d", "does not parse"),
        ("999999w", "over 100 years"),
    ],
)
def test_bad_ages_name_the_field(text: str, problem: str) -> None:
    with pytest.raises(InvalidRetention) as caught:
        parse_age(text, field="--older-than")
    assert caught.value.field == "--older-than"
    assert problem in str(caught.value)


def test_statuses_must_be_terminal_and_known() -> None:
    assert parse_statuses(["FAILED", "lost"]) == {TaskStatus.FAILED, TaskStatus.LOST}
    for bad, problem in (("running", "not terminal"), ("queued", "not terminal"), ("ok", "not a")):
        with pytest.raises(InvalidRetention, match=problem) as caught:
            parse_statuses([bad])
        assert caught.value.field == "status"


@pytest.mark.parametrize("batch", [0, -1, True, 1.5, "10", 100_001])
def test_a_batch_is_a_positive_bounded_int(batch: object) -> None:
    with pytest.raises(InvalidRetention) as caught:
        check_batch(batch)
    assert caught.value.field == "batch"


def test_the_default_keeps_terminal_tasks_a_week() -> None:
    (rule,) = selections(Retention(), _NOW)
    assert rule == PruneSelection(finished_before=_NOW - timedelta(days=7))


def test_failed_and_by_name_periods_become_their_own_rules() -> None:
    retention = Retention(
        terminal=timedelta(days=7),
        failed=timedelta(days=30),
        by_name={"report": timedelta(days=90), "audit": None},
    )
    by_name, failed, terminal = selections(retention, _NOW)
    assert by_name == PruneSelection(
        finished_before=_NOW - timedelta(days=90), names=frozenset({"report"})
    )
    assert failed.statuses == FAILED_STATUSES
    assert failed.finished_before == _NOW - timedelta(days=30)
    assert terminal.statuses == TERMINAL_STATUSES - FAILED_STATUSES
    assert failed.exclude_names == terminal.exclude_names == {"report", "audit"}


def test_none_keeps_forever() -> None:
    assert selections(Retention(terminal=None), _NOW) == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"terminal": timedelta(hours=2)}, "terminal"),
        ({"failed": timedelta(minutes=5)}, "failed"),
        ({"by_name": {"report": timedelta(hours=23)}}, "by_name['report']"),
    ],
)
def test_a_period_shorter_than_the_idempotency_window_is_refused(
    fields: dict[str, object], field: str
) -> None:
    with pytest.raises(RetentionTooShort) as caught:
        Retention(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert "idempotency window (1d)" in str(caught.value)
    Retention(**fields, idempotency_window=timedelta(minutes=5))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"terminal": timedelta(days=-7)}, "terminal"),
        ({"terminal": 7}, "terminal"),
        ({"idempotency_window": timedelta(0)}, "idempotency_window"),
        ({"by_name": {"": timedelta(days=7)}}, "by_name"),
        ({"by_name": [("x", timedelta(days=7))]}, "by_name"),
        ({"batch": 0}, "batch"),
        ({"interval": 0}, "interval"),
        ({"pause": -1}, "pause"),
        ({"pause": float("nan")}, "pause"),
    ],
)
def test_bad_retention_names_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRetention) as caught:
        Retention(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert isinstance(caught.value, ConfigurationError)


def test_a_selection_must_be_aware_and_terminal() -> None:
    naive = PruneSelection(finished_before=datetime(2026, 1, 1))
    with pytest.raises(InvalidRetention, match="finished_before"):
        check_selection(naive)
    with pytest.raises(InvalidRetention, match="status"):
        check_selection(PruneSelection(finished_before=_NOW, statuses=frozenset()))
    with pytest.raises(InvalidRetention, match="not terminal"):
        check_selection(
            PruneSelection(finished_before=_NOW, statuses=frozenset({TaskStatus.PAUSED}))
        )


def test_a_retention_is_a_value() -> None:
    one = Retention(by_name={"report": timedelta(days=90)})
    same = Retention(by_name={"report": timedelta(days=90)})
    assert one == same
    assert hash(one) == hash(same)
    assert one != Retention()
