from __future__ import annotations

import math

import pytest

from chongming.errors import ConfigurationError
from chongming.policies import ControlWindows, Timeout
from chongming.state import FailureKind


@pytest.mark.parametrize("field", ["start", "per_attempt", "idle"])
@pytest.mark.parametrize("value", [0, -1, math.inf, math.nan, "5", True])
def test_bad_timeouts(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=field):
        Timeout(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["stop_grace", "cancel_window", "pause_window"])
@pytest.mark.parametrize("value", [0, -0.5, math.nan])
def test_bad_windows(field: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=field):
        ControlWindows(**{field: value})


def test_earliest_expiry_wins() -> None:
    timeout = Timeout(per_attempt=10, idle=3)
    expiry = timeout.attempt_expiry(attempt_started=100, last_checkpoint=100)
    assert expiry is not None
    assert (expiry.at, expiry.kind) == (103, FailureKind.TIMEOUT_IDLE)
    expiry = timeout.attempt_expiry(attempt_started=100, last_checkpoint=108)
    assert expiry is not None
    assert (expiry.at, expiry.kind) == (110, FailureKind.TIMEOUT_ATTEMPT)


def test_no_limits_no_expiry() -> None:
    assert Timeout().attempt_expiry(0, 0) is None
    assert Timeout().start_expiry(0) is None
    start = Timeout(start=2).start_expiry(5)
    assert start is not None
    assert (start.at, start.kind) == (7, FailureKind.TIMEOUT_START)
