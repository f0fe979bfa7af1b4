"""The executor port: how a *sync* task function is carried.

``async def`` tasks never go through an executor; they run on the loop. An
executor declares how it honours a forced stop, because that decides what
the runtime may truthfully record:

- ``StopSemantics.ABANDON``: the carrier cannot be killed (a thread). After the
  stop grace window the runtime stops waiting and records ``lost``.
- ``StopSemantics.KILL``: the carrier is really ended (a process). The task is
  ``stopped`` once the executor confirms the kill.
- ``StopSemantics.NONE``: the call runs on the loop thread; nothing can
  interrupt it, and no control request can even arrive while it runs.
"""

from __future__ import annotations

import abc
import asyncio
import enum
from collections.abc import Callable
from typing import Any

from chongming.errors import FencingError
from chongming.state.records import Failure
from chongming.task_api.context import TaskContext
from chongming.task_api.journal import ParkRequest
from chongming.task_api.signals import CarrierKind

__all__ = [
    "CarrierFailure",
    "Executor",
    "StopSemantics",
    "ThreadBaseException",
    "call_guarded",
    "ends_its_carrier",
]


class StopSemantics(enum.Enum):
    ABANDON = "abandon"
    KILL = "kill"
    NONE = "none"


class ThreadBaseException(Exception):
    """A ``BaseException`` such as ``SystemExit`` raised by task code in a carrier.

    It is turned into an ordinary failure so it can neither kill the worker
    nor unwind the event loop (see :func:`ends_its_carrier` for which).
    """

    def __init__(self, original: BaseException) -> None:
        self.original_type = type(original).__name__
        super().__init__(f"{self.original_type}: {original}")


#: The ``BaseException``\ s that are the runtime's own: cancellation, a durable
#: task parking, a replaced attempt fenced off. Task code lets them through.
_RUNTIME_OWN = (asyncio.CancelledError, ParkRequest, FencingError)


def ends_its_carrier(error: BaseException) -> bool:
    """Whether ``error``, raised by task code, would end whatever runs it.

    ``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit`` and any other
    ``BaseException`` that is not an ``Exception`` and not the runtime's own
    (``_RUNTIME_OWN``). Raised out of a worker thread or an asyncio task it
    would stop the event loop; the runtime turns it into a failure of the
    attempt instead (not retried: it will not get better).
    """
    return not isinstance(error, Exception) and not isinstance(error, _RUNTIME_OWN)


def call_guarded(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a :func:`ends_its_carrier` error comes out wrapped.

    Wrapped in :class:`ThreadBaseException`, an ``Exception``, it fails the
    call like any error instead of unwinding the thread or the loop.
    """
    try:
        return fn(*args, **kwargs)
    except Exception:
        raise
    except BaseException as error:
        if ends_its_carrier(error):
            raise ThreadBaseException(error) from error
        raise


class CarrierFailure(Exception):
    """The carrier knows how the attempt failed and says it as a :class:`Failure`.

    A child process that crashed, a result it could not send, an exception
    the parent can only know by name: the runtime records ``failure`` as it
    is. ``error`` is what retry policies judge (the task's exception rebuilt
    in this process when its class is known here, else this exception).
    """

    def __init__(self, failure: Failure, error: BaseException | None = None) -> None:
        self.failure = failure
        self.error = error
        super().__init__(failure.message)


class Executor(abc.ABC):
    """Runs a sync task function and returns its result (or raises its exception)."""

    carrier: CarrierKind
    stop_semantics: StopSemantics

    @abc.abstractmethod
    async def run(
        self,
        fn: Callable[..., Any],
        context: TaskContext,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Call ``fn(context, *args, **kwargs)`` on the carrier.

        Cancellation: what happens to the carrier when this coroutine is
        cancelled is the executor's ``stop_semantics``.
        """

    async def aclose(self) -> None:
        """Release the executor's resources. Idempotent."""

    def check_target(self, fn: Callable[..., Any]) -> None:
        """Reject at submit time a function this executor cannot carry."""
