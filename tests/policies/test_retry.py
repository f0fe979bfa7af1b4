from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chongming.errors import ConfigurationError
from chongming.policies import ExponentialBackoff, RetryPolicy
from chongming.state import Failure, FailureKind


def failure(kind: FailureKind) -> Failure:
    return Failure(kind=kind, message="x", retryable=True)


def test_backoff_grows_and_caps() -> None:
    backoff = ExponentialBackoff(base=0.5, factor=2, max_delay=3)
    assert [backoff.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_backoff_huge_retry_number_does_not_overflow() -> None:
    assert ExponentialBackoff(base=1, factor=10, max_delay=60).delay(10_000) == 60


@given(st.integers(1, 50), st.floats(0, 1, exclude_max=True), st.floats(0, 1))
def test_jitter_stays_within_bounds(retry: int, unit: float, jitter: float) -> None:
    backoff = ExponentialBackoff(base=0.1, factor=3, max_delay=5, jitter=jitter)
    raw = min(0.1 * 3 ** (retry - 1), 5)
    delay = backoff.delay(retry, unit)
    assert 0 <= delay <= 5
    assert raw * (1 - jitter) - 1e-9 <= delay <= raw * (1 + jitter) + 1e-9


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": 0},
        {"base": -1},
        {"base": math.nan},
        {"factor": 0.5},
        {"max_delay": 0},
        {"jitter": 1.5},
        {"jitter": -0.1},
        {"base": "1"},
    ],
)
def test_bad_backoff(kwargs: dict[str, object]) -> None:
    (field,) = kwargs
    with pytest.raises(ConfigurationError, match=f"ExponentialBackoff.{field}"):
        ExponentialBackoff(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True, "3"])
def test_bad_attempts(attempts: object) -> None:
    with pytest.raises(ConfigurationError, match="max_attempts"):
        RetryPolicy(max_attempts=attempts)  # type: ignore[arg-type]


def test_bad_retry_on() -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(retry_on=(ValueError, "nope"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        RetryPolicy(retry_on=42)  # type: ignore[arg-type]


def test_decisions() -> None:
    policy = RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(base=1, factor=2))
    boom = failure(FailureKind.EXCEPTION)
    assert policy.decide(1, boom, ValueError()).retry
    assert policy.decide(1, boom, ValueError()).delay == 1
    assert policy.decide(2, boom, ValueError()).delay == 2
    assert not policy.decide(3, boom, ValueError()).retry  # budget spent
    assert policy.decide(1, failure(FailureKind.TIMEOUT_IDLE)).retry
    assert not policy.decide(1, failure(FailureKind.RESULT_INVALID)).retry
    assert not policy.decide(1, failure(FailureKind.LOST)).retry


def test_retry_on_filters_exceptions() -> None:
    only_io = RetryPolicy(max_attempts=5, retry_on=(OSError,))
    boom = failure(FailureKind.EXCEPTION)
    assert only_io.decide(1, boom, ConnectionError()).retry
    assert not only_io.decide(1, boom, ValueError()).retry
    predicate = RetryPolicy(max_attempts=5, retry_on=lambda e: "again" in str(e))
    assert predicate.decide(1, boom, RuntimeError("try again")).retry
    assert not predicate.decide(1, boom, RuntimeError("fatal")).retry
    no_timeouts = RetryPolicy(max_attempts=5, retry_timeouts=False)
    assert not no_timeouts.decide(1, failure(FailureKind.TIMEOUT_ATTEMPT)).retry


def test_a_failure_marked_not_retryable_is_not_retried() -> None:
    final = Failure(kind=FailureKind.EXCEPTION, message="x", retryable=False)
    assert not RetryPolicy(max_attempts=5).decide(1, final, ValueError()).retry
