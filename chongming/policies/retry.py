"""Retry and backoff as pure decisions: the caller supplies clock and randomness."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from chongming.errors import ConfigurationError
from chongming.state.records import Failure, FailureKind

__all__ = ["ExponentialBackoff", "RetryDecision", "RetryPolicy"]

# Kinds that say "trying again cannot help" or "we do not know what happened".
_NEVER_RETRIED = frozenset({FailureKind.RESULT_INVALID, FailureKind.LOST})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialBackoff:
    """``base * factor ** (n - 1)`` seconds before retry ``n``, capped at ``max_delay``.

    ``jitter`` spreads each delay uniformly over ``±jitter`` of itself so that
    many tasks failing together do not retry together.
    """

    base: float = 1.0
    factor: float = 2.0
    max_delay: float = 60.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        _positive("base", self.base)
        if not math.isfinite(self.factor) or self.factor < 1.0:
            raise ConfigurationError(f"factor must be >= 1, got {self.factor!r}")
        _positive("max_delay", self.max_delay)
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigurationError(f"jitter must be within [0, 1], got {self.jitter!r}")

    def delay(self, retry_number: int, random_unit: float = 0.5) -> float:
        """Delay before retry ``retry_number`` (1 = the first retry).

        ``random_unit`` is a value in ``[0, 1)`` the caller drew; 0.5 means no jitter.
        """
        exponent = max(0, retry_number - 1)
        try:
            raw = self.base * self.factor**exponent
        except OverflowError:
            raw = self.max_delay
        raw = min(raw, self.max_delay)
        spread = raw * self.jitter * (2.0 * random_unit - 1.0)
        return max(0.0, min(self.max_delay, raw + spread))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RetryDecision:
    retry: bool
    delay: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts a task gets and which failures earn another one.

    ``retry_on`` is a tuple of exception types or a predicate on the
    exception. Timeouts are retried when ``retry_timeouts`` is true. An
    invalid result or a ``lost`` attempt is never retried: the first cannot
    get better, and the second may still be running somewhere.
    """

    max_attempts: int = 1
    backoff: ExponentialBackoff = dataclasses.field(default_factory=ExponentialBackoff)
    retry_on: tuple[type[BaseException], ...] | Callable[[BaseException], bool] = (Exception,)
    retry_timeouts: bool = True

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ConfigurationError(
                f"max_attempts must be an integer >= 1, got {self.max_attempts!r}"
            )
        if isinstance(self.retry_on, tuple):
            for kind in self.retry_on:
                if not (isinstance(kind, type) and issubclass(kind, BaseException)):
                    raise ConfigurationError(f"retry_on entries must be exception types: {kind!r}")
        elif not callable(self.retry_on):
            raise ConfigurationError("retry_on must be a tuple of exception types or a callable")

    def is_retryable(self, failure: Failure, error: BaseException | None) -> bool:
        """Whether this failure kind (and exception) may earn another attempt at all."""
        if failure.kind in _NEVER_RETRIED or not failure.retryable:
            return False
        if failure.kind in (
            FailureKind.TIMEOUT_ATTEMPT,
            FailureKind.TIMEOUT_IDLE,
            FailureKind.TIMEOUT_START,
        ):
            return self.retry_timeouts
        if failure.kind is FailureKind.EXCEPTION and error is not None:
            if isinstance(self.retry_on, tuple):
                return isinstance(error, self.retry_on)
            return bool(self.retry_on(error))
        return failure.kind is FailureKind.CRASHED

    def decide(
        self,
        attempt: int,
        failure: Failure,
        error: BaseException | None = None,
        random_unit: float = 0.5,
    ) -> RetryDecision:
        """After attempt number ``attempt`` failed, retry or give up?"""
        if attempt >= self.max_attempts or not self.is_retryable(failure, error):
            return RetryDecision(retry=False)
        return RetryDecision(retry=True, delay=self.backoff.delay(attempt, random_unit))


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{name} must be a positive finite number, got {value!r}")
