"""What a task context needs of a durable task's journal (the control plane provides it)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from chongming.errors import ChildFailed

__all__ = [
    "MAX_WAIT",
    "ChildEnd",
    "ChildHandle",
    "EffectInfo",
    "ParkRequest",
    "StepJournal",
    "StepObserver",
]

#: The longest durable sleep, fact timeout or poll interval (seconds): 100 years.
#: Longer is no deadline a store can keep well; a wait without one is ``timeout=None``.
MAX_WAIT = 100 * 365.25 * 86400


class ParkRequest(BaseException):
    """Raised by a durable task's long sleep or wait: end this attempt, queue the task.

    Internal: the attempt turns it into a *parked* verdict (no carrier, no
    slot until ``wake_at``, or until the ``fact`` it waits for is sent). A
    ``BaseException`` so ``except Exception`` in the task does not stop it
    on its way out.
    """

    def __init__(self, wake_at: float, fact: str | None = None) -> None:
        self.wake_at = wake_at
        self.fact = fact
        super().__init__(f"parked until {wake_at}" + (f" or fact {fact!r}" if fact else ""))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EffectInfo:
    """What ``ctx.effect`` tells the operation it runs.

    ``idempotency_key`` is ``<task id>:<op key>``, the same in every attempt:
    pass it to the external system so a repeat is recognised there.
    ``resumed``: an earlier attempt began this operation and left no result —
    it may have reached the outside world; reconcile the external state first.
    """

    idempotency_key: str
    resumed: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChildHandle:
    """A child task ``ctx.spawn`` enqueued: await it with ``ctx.gather(handle)``.

    ``task_id`` is the child's id in the store (``chongming status`` shows it,
    with this task as its parent); ``name`` the task name it runs.
    """

    task_id: str
    name: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChildEnd:
    """How a child ended, as ``ctx.as_completed`` gives it: :meth:`result` or its fields.

    ``status`` is the child's terminal status (``"succeeded"``, ``"failed"``,
    ``"stopped"``, ...); ``value`` its result when it succeeded; ``message``
    and ``error_type`` its failure otherwise.
    """

    handle: ChildHandle
    status: str
    value: Any = None
    message: str = ""
    error_type: str = ""

    @property
    def task_id(self) -> str:
        return self.handle.task_id

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def result(self) -> Any:
        """The child's result, or :class:`~chongming.errors.ChildFailed` if it did not succeed."""
        if self.ok:
            return self.value
        raise ChildFailed(self.handle.task_id, self.status, self.message, self.error_type)

    @classmethod
    def from_fact(cls, handle: ChildHandle, end: object) -> ChildEnd:
        """Read the fact a child's end left for its parent (:mod:`chongming.stores.children`)."""
        end = end if isinstance(end, dict) else {}
        status = str(end.get("status", "unknown"))
        if status == "succeeded":
            return cls(handle=handle, status=status, value=end.get("result"))
        failure = end.get("failure")
        failure = failure if isinstance(failure, dict) else {}
        return cls(
            handle=handle,
            status=status,
            message=str(failure.get("message") or f"the child ended {status}"),
            error_type=str(failure.get("exception_type") or ""),
        )


#: Wraps one durable call: ``observe(kind, name, journal, call)`` returns ``call``
#: or a coroutine that awaits it (see :meth:`chongming.Observer.wrap_step`).
StepObserver = Callable[[str, str, Any, Coroutine[Any, Any, Any]], Coroutine[Any, Any, Any]]


class StepJournal(Protocol):
    """One attempt's memoised steps; see :mod:`chongming.plane.durable`."""

    @property
    def replaying(self) -> bool: ...

    #: Whether this attempt may park (end, and come back at a wake-up time).
    parkable: bool

    #: ``observe(kind, name, journal, call)``: the observers' wrapper of each durable
    #: call (``kind``: step, effect, sleep, fact), or None (nobody watches).
    observe: StepObserver | None

    @property
    def replays(self) -> int:
        """Recorded outcomes this attempt replayed so far (a wrapper sees if a call replayed)."""
        ...

    @property
    def epoch(self) -> int:
        """The fencing epoch of this attempt (raised by each attempt's start)."""
        ...

    def check_fenced(self) -> None:
        """Raise :class:`~chongming.errors.FencingError` once the attempt was replaced."""

    async def step(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Replay the step ``name`` if recorded, else run ``fn`` and record it."""

    async def wait_for_fact(
        self,
        name: str,
        *,
        timeout: float | None,
        check: Callable[[], Any] | None,
        poll_interval: float,
        beat: Callable[[], Awaitable[None]],
    ) -> Any:
        """The fact ``name``, or a recorded timeout; decided once and replayed."""

    async def effect(
        self,
        op_key: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        commit: Callable[[Any, Any], Any] | None,
    ) -> Any:
        """Run an operation once per task through the ledger; its result."""

    async def sleep(
        self, name: str, seconds: float, *, beat: Callable[[], Awaitable[None]]
    ) -> None:
        """Sleep until a wake-up time recorded once."""

    async def spawn(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str | None,
        options: Mapping[str, Any] | None = None,
    ) -> ChildHandle:
        """Enqueue a child task once per task (a memoised step); its handle."""

    async def gathered(
        self, handles: Sequence[ChildHandle], beat: Callable[[], Awaitable[None]]
    ) -> list[ChildEnd]:
        """Each child's end, in ``handles`` order, once all ended; decided once."""
        ...

    def as_completed(
        self, handles: Sequence[ChildHandle], beat: Callable[[], Awaitable[None]]
    ) -> AsyncIterator[ChildEnd]:
        """Each child's end as it comes; the order is recorded once and replayed."""
        ...

    async def enqueue(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``controller.enqueue`` on the controller that runs this task."""

    async def signal(self, task_id: str, name: str, payload: Any, key: str | None) -> bool:
        """``controller.signal`` on the controller that runs this task."""
