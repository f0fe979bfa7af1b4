"""How long the runtime waits for a task to honour a control request."""

from __future__ import annotations

import dataclasses

from chongming.policies.checks import check_seconds

__all__ = ["ControlWindows"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ControlWindows:
    """Seconds the runtime grants before it stops pretending.

    - ``stop_grace``: after a stop request, how long a task may take to reach a
      checkpoint and end. Then a coroutine is cancelled, a thread is abandoned
      (``lost``) and a process is terminated.
    - ``cancel_window``: after a coroutine was cancelled, how long it may take
      to unwind before it is declared ``lost`` (it swallowed the cancellation).
    - ``pause_window``: how long ``pause()`` waits for a checkpoint before it
      rolls the state back to ``running`` and returns ``False``.
    """

    stop_grace: float = 5.0
    cancel_window: float = 1.0
    pause_window: float = 2.0

    def __post_init__(self) -> None:
        for name in ("stop_grace", "cancel_window", "pause_window"):
            check_seconds("ControlWindows", name, getattr(self, name))
