"""Constructors refuse bad values with a ConfigurationError that names the field.

A policy or a query is built once, often from configuration, and read at the
worst moment (a retry decision, a stop, a listing). Every numeric field is
checked for type (``bool`` is not a number), finiteness and range; strings,
collections and callables for what the code that reads them relies on.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming import (
    ConfigurationError,
    ControlWindows,
    ExponentialBackoff,
    Failure,
    FailureKind,
    InMemoryTaskStore,
    RetryPolicy,
    SqliteTaskStore,
    TaskQuery,
    TaskStatus,
    TaskStore,
    Timeout,
)
from chongming.testing.store_contract import make_snapshot

S = TaskStatus
BOOM = Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True)

#: Not a number for any field: strings, bools, None, other numeric types.
NOT_NUMBERS: list[object] = ["2", b"2", True, False, None, [2], 2j, decimal.Decimal("2")]
#: Numbers that no field takes: not finite, or beyond any float.
NOT_FINITE: list[object] = [math.nan, math.inf, -math.inf, 10**400]


def ident(value: object) -> str:
    """A short test id that is the same in every process (``make test`` runs in several).

    Also for ints too long to print; objects and functions are named by their
    type, never by their address.
    """
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**20:
        return f"2**{value.bit_length() - 1}+"
    if callable(value) and getattr(value, "__name__", "") == "<lambda>":
        return "lambda"
    if type(value) is object:
        return "object()"
    return repr(value)


def refused(field: str, build: Callable[[], object]) -> ConfigurationError:
    """``build()`` raises a ConfigurationError whose message names ``field``."""
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert field in str(caught.value), str(caught.value)
    return caught.value


# -- ExponentialBackoff ------------------------------------------------------------------

BACKOFF_FIELDS = ["base", "factor", "max_delay", "jitter"]


@pytest.mark.parametrize("field", BACKOFF_FIELDS)
@pytest.mark.parametrize("value", NOT_NUMBERS + NOT_FINITE, ids=ident)
def test_backoff_fields_must_be_finite_numbers(field: str, value: object) -> None:
    refused(f"ExponentialBackoff.{field}", lambda: ExponentialBackoff(**{field: value}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("base", 0),
        ("base", -0.1),
        ("factor", 0.999),
        ("factor", -2),
        ("max_delay", 0),
        ("max_delay", -1),
        ("jitter", -0.01),
        ("jitter", 1.01),
    ],
)
def test_backoff_fields_out_of_range(field: str, value: float) -> None:
    refused(f"ExponentialBackoff.{field}", lambda: ExponentialBackoff(**{field: value}))


def test_backoff_range_edges_are_accepted() -> None:
    edges = ExponentialBackoff(base=1e-9, factor=1, max_delay=1e-9, jitter=1)
    assert edges.delay(3, 0.5) == 1e-9
    assert ExponentialBackoff(jitter=0).delay(1, 0.99) == 1.0


# -- Timeout and ControlWindows -----------------------------------------------------------

TIMEOUT_FIELDS = ["per_attempt", "idle", "start"]
WINDOW_FIELDS = ["stop_grace", "cancel_window", "pause_window"]


@pytest.mark.parametrize("field", TIMEOUT_FIELDS)
@pytest.mark.parametrize(
    "value", [*NOT_NUMBERS[:4], *NOT_NUMBERS[5:], *NOT_FINITE, 0, -1], ids=ident
)
def test_timeout_fields(field: str, value: object) -> None:
    refused(f"Timeout.{field}", lambda: Timeout(**{field: value}))  # type: ignore[arg-type]


def test_timeout_none_means_no_limit_and_positional_order_is_kept() -> None:
    assert Timeout(None, None, None) == Timeout()
    assert Timeout(30, 10) == Timeout(per_attempt=30, idle=10)


@pytest.mark.parametrize("field", WINDOW_FIELDS)
@pytest.mark.parametrize("value", [*NOT_NUMBERS, *NOT_FINITE, 0, -0.5], ids=ident)
def test_window_fields(field: str, value: object) -> None:
    refused(f"ControlWindows.{field}", lambda: ControlWindows(**{field: value}))  # type: ignore[arg-type]


def test_windows_take_ints_and_floats() -> None:
    windows = ControlWindows(stop_grace=1, cancel_window=0.25, pause_window=3)
    assert (windows.stop_grace, windows.cancel_window, windows.pause_window) == (1, 0.25, 3)


# -- RetryPolicy ------------------------------------------------------------------------


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True, "3", None, 2**31, 10**5000], ids=ident)
def test_max_attempts_is_an_int_a_store_can_keep(attempts: object) -> None:
    refused("RetryPolicy.max_attempts", lambda: RetryPolicy(max_attempts=attempts))  # type: ignore[arg-type]


def test_max_attempts_at_the_stored_bound_is_accepted() -> None:
    assert RetryPolicy(max_attempts=2**31 - 1).max_attempts == 2**31 - 1


@pytest.mark.parametrize("value", ["no", "", 0, 1, None, [True]])
def test_retry_timeouts_must_be_a_bool(value: object) -> None:
    """``"no"`` is truthy: accepted, it would retry every timeout."""
    refused("RetryPolicy.retry_timeouts", lambda: RetryPolicy(retry_timeouts=value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "backoff",
    [5, 0.5, "exponential", None, {"base": 1}, object(), ExponentialBackoff],
    ids=ident,
)
def test_a_backoff_without_a_delay_method_is_refused_at_construction(backoff: object) -> None:
    """It used to be accepted and to raise AttributeError at the first retry decision."""
    refused("RetryPolicy.backoff", lambda: RetryPolicy(max_attempts=3, backoff=backoff))  # type: ignore[arg-type]


class NoArguments:
    def delay(self) -> float:
        return 1.0


class TooManyArguments:
    def delay(self, retry_number: int, random_unit: float, extra: str) -> float:
        return 1.0


class NotCallable:
    delay = 1.0


@pytest.mark.parametrize("backoff", [NoArguments(), TooManyArguments(), NotCallable()])
def test_a_delay_that_cannot_take_two_arguments_is_refused(backoff: object) -> None:
    refused("RetryPolicy.backoff", lambda: RetryPolicy(max_attempts=3, backoff=backoff))  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class Fixed:
    """A custom backoff: any object with ``delay(retry_number, random_unit)``."""

    seconds: object

    def delay(self, retry_number: int, random_unit: float) -> float:
        return self.seconds  # type: ignore[return-value]  # the tests feed it bad answers too


def test_a_custom_backoff_is_used_for_the_delay() -> None:
    policy = RetryPolicy(max_attempts=3, backoff=Fixed(0.25))
    decision = policy.decide(1, BOOM, ValueError())
    assert (decision.retry, decision.delay) == (True, 0.25)
    assert RetryPolicy(max_attempts=3, backoff=Fixed(2)).decide(2, BOOM, ValueError()).delay == 2.0


@pytest.mark.parametrize("answer", [-1, math.nan, math.inf, "1", None, True, 10**400], ids=ident)
def test_a_custom_backoff_answer_that_is_no_delay_is_refused(answer: object) -> None:
    policy = RetryPolicy(max_attempts=3, backoff=Fixed(answer))
    error = refused("RetryPolicy.backoff", lambda: policy.decide(1, BOOM, ValueError()))
    assert "before retry 1" in str(error)


def test_one_exception_type_for_retry_on_is_a_tuple_of_one() -> None:
    """A class is callable: taken as a predicate, ``ValueError(error)`` is always truthy."""
    policy = RetryPolicy(max_attempts=3, retry_on=ValueError)  # type: ignore[arg-type]
    assert policy.retry_on == (ValueError,)
    assert policy.decide(1, BOOM, ValueError()).retry
    assert not policy.decide(1, BOOM, KeyError()).retry


@pytest.mark.parametrize(
    "retry_on",
    [str, 42, "ValueError", [ValueError], (ValueError, "nope"), (ValueError, 3), lambda: True],
    ids=ident,
)
def test_retry_on_that_cannot_answer_is_refused(retry_on: object) -> None:
    refused("RetryPolicy.retry_on", lambda: RetryPolicy(retry_on=retry_on))  # type: ignore[arg-type]


def test_retry_on_takes_a_predicate_and_an_empty_tuple() -> None:
    predicate = RetryPolicy(max_attempts=2, retry_on=lambda error: "again" in str(error))
    assert predicate.decide(1, BOOM, RuntimeError("try again")).retry
    assert not RetryPolicy(max_attempts=2, retry_on=()).decide(1, BOOM, ValueError()).retry


# -- TaskQuery --------------------------------------------------------------------------


@pytest.mark.parametrize("statuses", ["running", b"running", 5, TaskStatus.RUNNING], ids=ident)
def test_statuses_refuses_a_bare_string_or_a_scalar(statuses: object) -> None:
    """``frozenset("running")`` is a set of letters, which silently matched nothing."""
    refused("TaskQuery.statuses", lambda: TaskQuery(statuses=statuses))  # type: ignore[arg-type]


@pytest.mark.parametrize("member", ["nope", "RUNNING", 5, None, b"running"], ids=ident)
def test_statuses_members_must_be_statuses(member: object) -> None:
    error = refused("TaskQuery.statuses", lambda: TaskQuery(statuses=[S.QUEUED, member]))  # type: ignore[arg-type]
    assert "valid statuses: pending, blocked" in str(error)


def test_statuses_take_members_or_values_and_become_members() -> None:
    query = TaskQuery(statuses=["running", S.PAUSED])  # type: ignore[arg-type]
    assert query.statuses == frozenset({S.RUNNING, S.PAUSED})
    assert all(type(status) is TaskStatus for status in query.statuses)
    assert TaskQuery(statuses=()).statuses == frozenset()  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["tag", "name", "owner"])
@pytest.mark.parametrize("value", [5, b"io", ["io"], "a\x00b", "bad \udc80 name"], ids=ident)
def test_text_fields_must_be_strings_every_store_can_compare(field: str, value: object) -> None:
    refused(f"TaskQuery.{field}", lambda: TaskQuery(**{field: value}))  # type: ignore[arg-type]


@pytest.mark.parametrize("bucket", [-1, True, "1", 1.0, None, 2**31])
def test_buckets_are_stored_bucket_numbers(bucket: object) -> None:
    if bucket is not None:
        refused("TaskQuery.bucket", lambda: TaskQuery(bucket=bucket))  # type: ignore[arg-type]
    refused("TaskQuery.buckets", lambda: TaskQuery(buckets=[0, bucket]))  # type: ignore[arg-type]


@pytest.mark.parametrize("buckets", ["12", b"12", 7], ids=ident)
def test_buckets_refuses_a_string_or_a_scalar(buckets: object) -> None:
    refused("TaskQuery.buckets", lambda: TaskQuery(buckets=buckets))  # type: ignore[arg-type]


def test_buckets_become_a_frozenset() -> None:
    assert TaskQuery(buckets=[3, 1, 3]).buckets == frozenset({1, 3})  # type: ignore[arg-type]
    assert TaskQuery(bucket=2**31 - 1).bucket == 2**31 - 1


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "5", 2**63, 10**5000], ids=ident)
def test_limit_is_a_positive_int_every_store_takes(limit: object) -> None:
    refused("TaskQuery.limit", lambda: TaskQuery(limit=limit))  # type: ignore[arg-type]


def test_a_query_by_status_values_matches_like_one_by_members() -> None:
    running = make_snapshot("a", status=S.RUNNING)
    assert TaskQuery(statuses=["running"]).matches(running)  # type: ignore[arg-type]
    assert not TaskQuery(statuses=["paused"]).matches(running)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_every_store_answers_a_query_by_status_values(kind: str, tmp_path: Path) -> None:
    """Stores read ``status.value``: a plain string in ``statuses`` used to crash them."""
    store: TaskStore = (
        InMemoryTaskStore() if kind == "memory" else SqliteTaskStore(tmp_path / "tasks.db")
    )
    try:
        for task_id, status in (("a", S.QUEUED), ("b", S.RUNNING), ("c", S.PAUSED)):
            await store.create(make_snapshot(task_id, status=status))
        found = await store.query(TaskQuery(statuses={"running", "paused"}))  # type: ignore[arg-type]
        assert [snapshot.task_id for snapshot in found] == ["b", "c"]
    finally:
        await store.close()
