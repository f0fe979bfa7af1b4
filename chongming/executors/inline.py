"""Sync task functions called directly on the event-loop thread.

For tests and trivial work only: while the function runs, the loop runs
nothing else. Stop semantics: none — no request can arrive while the call
runs; a stop requested before it starts is honoured at its first checkpoint.
Pause cannot be honoured (a checkpoint on the loop thread must not block), so
``pause()`` rolls back and returns ``False``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chongming.executors.base import Executor, StopSemantics, call_guarded
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import CarrierKind

__all__ = ["InlineExecutor"]


class InlineExecutor(Executor):
    """Runs a sync task function on the loop thread: for tests and trivial work.

    Nothing else on the loop runs meanwhile, so it cannot be stopped mid-call
    and cannot pause (``pause()`` rolls back and returns ``False``).
    """

    carrier = CarrierKind.INLINE
    stop_semantics = StopSemantics.NONE

    async def run(
        self,
        fn: Callable[..., Any],
        context: TaskContext,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        # SystemExit, KeyboardInterrupt, GeneratorExit of task code become failures:
        # the loop's own SIGINT handling (asyncio.run, `chongming worker`) ends a program.
        return call_guarded(fn, context, *args, **kwargs)

    def __repr__(self) -> str:
        return "InlineExecutor()"
