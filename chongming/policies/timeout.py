"""The three independent timeouts of a task; the earliest to expire wins."""

from __future__ import annotations

import dataclasses

from chongming.policies.checks import check_seconds
from chongming.state.records import FailureKind

__all__ = ["Expiry", "Timeout"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Expiry:
    at: float
    kind: FailureKind


@dataclasses.dataclass(frozen=True, slots=True)
class Timeout:
    """Seconds; ``None`` means no limit.

    - ``start``: from submit until the task actually runs (queue wait included);
    - ``per_attempt``: the whole of one attempt;
    - ``idle``: since the last ``ctx.checkpoint()`` (``ctx.progress`` does not count).

    Time spent paused counts toward none of them: a pause is the operator's
    decision, not the task being slow.
    """

    per_attempt: float | None = None
    idle: float | None = None
    start: float | None = None

    def __post_init__(self) -> None:
        for name in ("per_attempt", "idle", "start"):
            value = getattr(self, name)
            if value is not None:
                check_seconds("Timeout", name, value)

    @property
    def watches_attempt(self) -> bool:
        return self.per_attempt is not None or self.idle is not None

    def attempt_expiry(self, attempt_started: float, last_checkpoint: float) -> Expiry | None:
        """The earliest attempt-level expiry given two monotonic readings."""
        best: Expiry | None = None
        if self.per_attempt is not None:
            best = Expiry(at=attempt_started + self.per_attempt, kind=FailureKind.TIMEOUT_ATTEMPT)
        if self.idle is not None:
            idle_at = last_checkpoint + self.idle
            if best is None or idle_at < best.at:
                best = Expiry(at=idle_at, kind=FailureKind.TIMEOUT_IDLE)
        return best

    def start_expiry(self, submitted: float) -> Expiry | None:
        if self.start is None:
            return None
        return Expiry(at=submitted + self.start, kind=FailureKind.TIMEOUT_START)
