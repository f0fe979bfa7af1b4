"""What a durable call of the task API checks before its journal sees it.

``ctx.step``, ``effect``, ``sleep``, ``wait_for_fact``, ``spawn``, ``gather``,
``as_completed``, ``enqueue`` and ``signal`` each refuse a task that is not
durable, a fenced-off attempt, a bad argument (before anything runs or is
recorded) and, where a call would start work, a stop already asked for; then
they hand the call to the attempt's journal, through the observers' wrapper
(tracing's step spans). The methods on :class:`~chongming.task_api.context.TaskContext`
keep the user's documentation and call these.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from chongming.errors import (
    CheckpointMisuse,
    ChildFailed,
    ConfigurationError,
    PayloadError,
    TaskCancelled,
)
from chongming.state.durable_names import MAX_NAME, check_name
from chongming.task_api.journal import MAX_WAIT, ChildEnd, ChildHandle, StepJournal

if TYPE_CHECKING:
    from chongming.task_api.context import TaskContext

__all__ = [
    "as_completed",
    "durable_journal",
    "effect",
    "gather",
    "sleep",
    "spawn",
    "step",
    "wait_for_fact",
]

#: Step names the runtime records under (``wait_for_fact`` and ``sleep``).
_RESERVED_STEPS = ("fact:", "sleep:", "child:", "children:")

Beat = Callable[[], Awaitable[None]]


async def step(
    ctx: TaskContext,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """``ctx.step``: see :meth:`TaskContext.step`."""
    journal = ctx.journal
    if journal is None:
        raise CheckpointMisuse(
            f"ctx.step() needs a durable task: register {ctx.name!r} with durable=True "
            "on a controller with a store"
        )
    journal.check_fenced()
    _check_name_arg("ctx.step", "step name", name)
    if name.startswith(_RESERVED_STEPS):
        raise ConfigurationError(
            f"step name {name!r}: names starting with 'fact:', 'sleep:', 'child:' or "
            "'children:' are the runtime's own (wait_for_fact, sleep, child and "
            "as_completed record under them)"
        )
    _check_callable("ctx.step", "fn", fn)
    if ctx.stop_requested:
        raise TaskCancelled(f"task {ctx.task_id!r} was asked to stop")
    call = journal.step(name, fn, args, kwargs)
    observe = journal.observe
    return await (call if observe is None else observe("step", name, journal, call))


async def effect(
    ctx: TaskContext,
    op_key: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    commit: Callable[[Any, Any], Any] | None,
) -> Any:
    """``ctx.effect``: see :meth:`TaskContext.effect`."""
    journal = ctx.journal
    if journal is None:
        raise CheckpointMisuse(
            f"ctx.effect() needs a durable task: register {ctx.name!r} with durable=True "
            "on a controller with a store"
        )
    journal.check_fenced()
    _check_name_arg("ctx.effect", "op_key", op_key, longest=1000)
    _check_callable("ctx.effect", "fn", fn)
    if commit is not None:
        _check_callable("ctx.effect", "commit", commit)
    if ctx.stop_requested:
        raise TaskCancelled(f"task {ctx.task_id!r} was asked to stop")
    call = journal.effect(op_key, fn, args, kwargs, commit)
    observe = journal.observe
    return await (call if observe is None else observe("effect", op_key, journal, call))


async def sleep(ctx: TaskContext, name: str, seconds: float, *, beat: Beat) -> None:
    """``ctx.sleep``: see :meth:`TaskContext.sleep`."""
    journal = ctx.journal
    if journal is None:
        raise CheckpointMisuse(
            f"ctx.sleep() needs a durable task: register {ctx.name!r} with durable=True "
            "on a controller with a store (a plain task can await asyncio.sleep)"
        )
    journal.check_fenced()
    _check_name_arg("ctx.sleep", "sleep name", name)
    seconds = _check_seconds("ctx.sleep", "seconds", seconds, zero=True)
    call = journal.sleep(name, seconds, beat=beat)
    observe = journal.observe
    await (call if observe is None else observe("sleep", name, journal, call))


async def wait_for_fact(
    ctx: TaskContext,
    name: str,
    *,
    timeout: float | None,
    check: Callable[[], Any] | None,
    poll_interval: float,
    beat: Beat,
) -> Any:
    """``ctx.wait_for_fact``: see :meth:`TaskContext.wait_for_fact`."""
    journal = ctx.journal
    if journal is None:
        raise CheckpointMisuse(
            f"ctx.wait_for_fact() needs a durable task: register {ctx.name!r} with "
            "durable=True on a controller with a store"
        )
    journal.check_fenced()
    what = "ctx.wait_for_fact"
    _check_name_arg(what, "fact name", name)
    seconds = None if timeout is None else _check_seconds(what, "timeout", timeout, zero=True)
    interval = _check_seconds(what, "poll_interval", poll_interval, zero=False)
    if check is not None:
        _check_callable(what, "check", check)
    call = journal.wait_for_fact(
        name,
        timeout=seconds,
        check=check,
        poll_interval=interval,
        beat=beat,
    )
    observe = journal.observe
    return await (call if observe is None else observe("fact", name, journal, call))


async def spawn(
    ctx: TaskContext, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
) -> ChildHandle:
    """``ctx.spawn``: see :meth:`TaskContext.spawn`."""
    journal = durable_journal(ctx, "ctx.spawn")
    _check_name_arg("ctx.spawn", "task name", name)
    if key is not None:
        _check_name_arg("ctx.spawn", "key", key, longest=1000)
    if ctx.stop_requested:
        raise TaskCancelled(f"task {ctx.task_id!r} was asked to stop")
    return await journal.spawn(name, args, kwargs, key)


async def gather(ctx: TaskContext, handles: tuple[ChildHandle, ...], *, beat: Beat) -> list[Any]:
    """``ctx.gather``: see :meth:`TaskContext.gather`."""
    journal = durable_journal(ctx, "ctx.gather")
    _check_handles("ctx.gather", handles)
    results: list[Any] = []
    failed: ChildFailed | None = None
    for end in await journal.gathered(handles, beat):
        try:
            results.append(end.result())
        except ChildFailed as error:
            failed = failed or error
            results.append(None)
    if failed is not None:
        raise failed
    return results


def as_completed(
    ctx: TaskContext, handles: tuple[ChildHandle, ...], *, beat: Beat
) -> AsyncIterator[ChildEnd]:
    """``ctx.as_completed``: see :meth:`TaskContext.as_completed`."""
    journal = durable_journal(ctx, "ctx.as_completed")
    _check_handles("ctx.as_completed", handles)
    return journal.as_completed(handles, beat)


def durable_journal(ctx: TaskContext, call: str) -> StepJournal:
    """The journal of ``ctx``'s attempt, checked not fenced off; or :class:`CheckpointMisuse`."""
    journal = ctx.journal
    if journal is None:
        raise CheckpointMisuse(
            f"{call}() needs a durable task: register {ctx.name!r} with durable=True "
            "on a controller with a store"
        )
    journal.check_fenced()
    return journal


def _check_name_arg(call: str, what: str, value: object, *, longest: int = MAX_NAME) -> None:
    """A durable name argument, refused before anything runs or is recorded."""
    try:
        check_name(value, what, longest=longest)
    except PayloadError as error:
        raise ConfigurationError(f"{call}(): {what} {value!r}: {error.reason}") from None


def _check_callable(call: str, what: str, value: object) -> None:
    if not callable(value):
        raise ConfigurationError(
            f"{call}(): {what} must be a function or coroutine function, got {value!r}"
        )


def _check_seconds(call: str, what: str, value: object, *, zero: bool) -> float:
    """A finite number of seconds: >= 0 (``zero``) or > 0, and at most :data:`MAX_WAIT`."""
    low = ">= 0" if zero else "> 0"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{call}(): {what} must be a number {low}, got {value!r}")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not (seconds >= 0 if zero else seconds > 0):
        raise ConfigurationError(f"{call}(): {what} must be a number {low}, got {value!r}")
    if not seconds <= MAX_WAIT:
        hint = (
            " (wait_for_fact: timeout=None waits without a deadline)" if what == "timeout" else ""
        )
        raise ConfigurationError(
            f"{call}(): {what} must be at most {MAX_WAIT:.0f} seconds (100 years), "
            f"got {value!r}{hint}"
        )
    return seconds


def _check_handles(what: str, handles: tuple[object, ...]) -> None:
    for handle in handles:
        if not isinstance(handle, ChildHandle):
            raise ConfigurationError(
                f"{what}(): each argument must be a handle from ctx.spawn(), got {handle!r}"
            )
