"""Retry and backoff as pure decisions: the caller supplies clock and randomness."""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable
from typing import Protocol

from chongming.errors import ConfigurationError
from chongming.policies.checks import check_bool, check_count, check_number, check_seconds, shown
from chongming.state.records import Failure, FailureKind

__all__ = ["Backoff", "ExponentialBackoff", "RetryDecision", "RetryPolicy"]

# Kinds that say "trying again cannot help" or "we do not know what happened".
_NEVER_RETRIED = frozenset({FailureKind.RESULT_INVALID, FailureKind.LOST})


class Backoff(Protocol):
    """What :class:`RetryPolicy` needs from a backoff: one pure method.

    ``delay(retry_number, random_unit)`` gives the seconds to wait before
    retry ``retry_number`` (1 = the first retry), a finite number ``>= 0``;
    ``random_unit`` is a value in ``[0, 1)`` the run drew. Both arguments are
    passed positionally. :class:`ExponentialBackoff` is the built-in one.
    """

    def delay(self, retry_number: int, random_unit: float, /) -> float: ...


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
        owner = "ExponentialBackoff"
        check_seconds(owner, "base", self.base)
        if check_number(owner, "factor", self.factor) < 1.0:
            raise ConfigurationError(f"{owner}.factor must be >= 1, got {self.factor!r}")
        check_seconds(owner, "max_delay", self.max_delay)
        if not 0.0 <= check_number(owner, "jitter", self.jitter) <= 1.0:
            raise ConfigurationError(f"{owner}.jitter must be within [0, 1], got {self.jitter!r}")

    def delay(self, retry_number: int, random_unit: float = 0.5) -> float:
        """Delay before retry ``retry_number`` (1 = the first retry).

        ``random_unit`` is a value in ``[0, 1)`` the caller drew; 0.5 means no jitter.
        """
        exponent = max(0, retry_number - 1)
        try:
            raw = float(self.base) * float(self.factor) ** exponent
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

    ``retry_on`` is a tuple of exception types (one exception type is taken
    as a tuple of one) or a predicate on the exception. Timeouts are retried
    when ``retry_timeouts`` is true. An invalid result or a ``lost`` attempt
    is never retried: the first cannot get better, and the second may still
    be running somewhere.

    ``backoff`` is an :class:`ExponentialBackoff` or any object with a
    ``delay(retry_number, random_unit)`` method (see :class:`Backoff`); it is
    checked here, not at the first retry, and :meth:`decide` refuses a delay
    that is not a finite number ``>= 0``.
    """

    max_attempts: int = 1
    backoff: Backoff = dataclasses.field(default_factory=ExponentialBackoff)
    retry_on: tuple[type[BaseException], ...] | Callable[[BaseException], bool] = (Exception,)
    retry_timeouts: bool = True

    def __post_init__(self) -> None:
        check_count("RetryPolicy", "max_attempts", self.max_attempts, minimum=1)
        _check_backoff(self.backoff)
        object.__setattr__(self, "retry_on", _checked_retry_on(self.retry_on))
        check_bool("RetryPolicy", "retry_timeouts", self.retry_timeouts)

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
        delay = self.backoff.delay(attempt, random_unit)
        return RetryDecision(retry=True, delay=self._checked_delay(attempt, delay))

    def _checked_delay(self, attempt: int, delay: object) -> float:
        """A custom backoff's answer, refused unless it is a usable number of seconds."""
        if not isinstance(delay, bool) and isinstance(delay, int | float):
            try:
                seconds = float(delay)
            except OverflowError:
                seconds = math.inf
            if 0.0 <= seconds < math.inf:
                return seconds
        raise ConfigurationError(
            f"RetryPolicy.backoff {self.backoff!r} returned {shown(delay)} as the delay "
            f"before retry {attempt}; a delay is a finite number of seconds >= 0"
        )


def _check_backoff(backoff: object) -> None:
    """Refuse at construction what would raise ``AttributeError`` at the first retry."""
    if isinstance(backoff, ExponentialBackoff):
        return
    if isinstance(backoff, type):
        raise ConfigurationError(
            f"RetryPolicy.backoff must be an instance, got the class {backoff.__name__}; "
            f"write {backoff.__name__}(...)"
        )
    delay = getattr(backoff, "delay", None)
    if not callable(delay):
        raise ConfigurationError(
            "RetryPolicy.backoff must be an ExponentialBackoff or have a "
            f"delay(retry_number, random_unit) method, got {shown(backoff)}"
        )
    if not _accepts(delay, 2):
        raise ConfigurationError(
            f"RetryPolicy.backoff.delay of {shown(backoff)} cannot be called as "
            "delay(retry_number, random_unit)"
        )


def _checked_retry_on(
    retry_on: object,
) -> tuple[type[BaseException], ...] | Callable[[BaseException], bool]:
    """The tuple or predicate ``is_retryable`` relies on; one exception type becomes a tuple.

    A class is callable, so without this check ``retry_on=ValueError`` would
    be taken for a predicate whose answer (an exception instance) is always true.
    """
    if isinstance(retry_on, type):
        if issubclass(retry_on, BaseException):
            return (retry_on,)
        raise ConfigurationError(
            f"RetryPolicy.retry_on must name exception types, got the class {retry_on.__name__}"
        )
    if isinstance(retry_on, tuple):
        for kind in retry_on:
            if not (isinstance(kind, type) and issubclass(kind, BaseException)):
                raise ConfigurationError(
                    f"RetryPolicy.retry_on entries must be exception types, got {shown(kind)}"
                )
        return retry_on
    if not callable(retry_on):
        raise ConfigurationError(
            "RetryPolicy.retry_on must be a tuple of exception types or a predicate "
            f"on the exception, got {shown(retry_on)}"
        )
    if not _accepts(retry_on, 1):
        raise ConfigurationError(
            f"RetryPolicy.retry_on {shown(retry_on)} cannot be called with one exception"
        )
    return retry_on


def _accepts(fn: Callable[..., object], positional: int) -> bool:
    """Whether ``fn`` can be called with ``positional`` arguments (True if not inspectable)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: give them the benefit
        return True
    try:
        signature.bind(*range(positional))
    except TypeError:
        return False
    return True
