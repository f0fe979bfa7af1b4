"""How a step's outcome is recorded, and how a recorded one answers a replay.

A value replays as itself; an error is kept as its type name and message
(text any store can keep) and replays as :class:`StepFailed`, never as the
original exception: the exception object may not survive a restart, and
the code must see the same answer on every attempt.
"""

from __future__ import annotations

from typing import Any

from chongming.errors import StepFailed
from chongming.run.verdict import storable_text
from chongming.stores.durable import StepKey, StepRecord

__all__ = ["recorded_failure", "replay", "replay_error", "step_label"]

_MESSAGE = 2000  # characters of a recorded error message


def step_label(key: StepKey) -> str:
    name, occurrence = key
    return name if occurrence == 0 else f"{name}#{occurrence}"


def recorded_failure(error: BaseException) -> dict[str, str]:
    """A step's error as recorded: type and message, in text every store can keep.

    Messages are made by code we do not control (NUL, a lone surrogate of a
    file name, a ``__str__`` that raises): escaped here, so the failure is
    recorded and replayed instead of being refused by the store, which would
    run the body again at every attempt.
    """
    try:
        message = str(error)
    except Exception as broken:
        message = f"<str() of the error raised {type(broken).__name__}>"
    return {
        "type": storable_text(type(error).__name__)[:_MESSAGE],
        "message": storable_text(message[:_MESSAGE])[: _MESSAGE * 2],
    }


def replay(step: StepRecord) -> Any:
    if step.ok:
        return step.value
    raise replay_error(step)


def replay_error(step: StepRecord) -> StepFailed:
    value = step.value if isinstance(step.value, dict) else {}
    return StepFailed(
        step_label((step.name, step.occurrence)),
        str(value.get("type", "Exception")),
        str(value.get("message", "")),
    )
