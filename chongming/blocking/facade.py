"""``BlockingController`` and its run handles: a ``Controller`` on a portal's loop thread.

The facade enters the controller on the loop thread of an anyio blocking
portal, hands every call to that thread and blocks its caller until the
loop answers (:meth:`BlockingController._run`); its run and queue handles
bridge through it. What a twin is, and how one is made, is
:mod:`chongming.blocking.twins`; the promises (threads, lifetime,
interruption) are in :mod:`chongming.blocking`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from chongming.blocking.twins import Bridge, blocking_twin, extends, loop_twin
from chongming.controller.controller import Controller
from chongming.controller.queued import QueuedTask
from chongming.errors import ConfigurationError, ControllerClosed
from chongming.run.outcome import Outcome
from chongming.run.task_run import TaskRun
from chongming.state.records import TaskSnapshot, Transition

__all__ = ["BlockingController", "BlockingQueuedTask", "BlockingTaskRun"]

_T = TypeVar("_T")
_P = ParamSpec("_P")


def _returning_handle(
    twin: Callable[Concatenate[Bridge, _P], TaskRun],
) -> Callable[Concatenate[BlockingController, _P], BlockingTaskRun]:
    """``twin``, answering with the sync handle of the ``TaskRun`` it returns."""

    def wrapped(
        self: BlockingController, /, *args: _P.args, **kwargs: _P.kwargs
    ) -> BlockingTaskRun:
        return BlockingTaskRun(self, twin(self, *args, **kwargs))

    functools.update_wrapper(wrapped, twin)
    signature = inspect.signature(twin).replace(return_annotation="BlockingTaskRun")
    wrapped.__signature__ = signature  # type: ignore[attr-defined]
    # A class object, not a name: typing.get_type_hints() evaluates names in the
    # module of the unwrapped coroutine, which has no BlockingTaskRun.
    wrapped.__annotations__ = {**wrapped.__annotations__, "return": _LateHandle}
    return wrapped


class _LateHandle:
    """Stands for ``BlockingTaskRun`` in annotations until that class exists."""


class _LateQueued:
    """Stands for ``BlockingQueuedTask`` in annotations until that class exists."""


def _returning_queued(
    twin: Callable[Concatenate[Bridge, _P], QueuedTask],
) -> Callable[Concatenate[BlockingController, _P], BlockingQueuedTask]:
    """``twin``, answering with the sync handle of the ``QueuedTask`` it returns."""

    def wrapped(
        self: BlockingController, /, *args: _P.args, **kwargs: _P.kwargs
    ) -> BlockingQueuedTask:
        return BlockingQueuedTask(self, twin(self, *args, **kwargs))

    functools.update_wrapper(wrapped, twin)
    signature = inspect.signature(twin).replace(return_annotation="BlockingQueuedTask")
    wrapped.__signature__ = signature  # type: ignore[attr-defined]
    wrapped.__annotations__ = {**wrapped.__annotations__, "return": _LateQueued}
    return wrapped


def _returning_queued_each(
    twin: Callable[Concatenate[Bridge, _P], list[Any]],
) -> Callable[Concatenate[BlockingController, _P], list[Any]]:
    """``twin``, answering with the sync handle of each ``QueuedTask`` in the list it returns."""

    def wrapped(self: BlockingController, /, *args: _P.args, **kwargs: _P.kwargs) -> list[Any]:
        return [
            BlockingQueuedTask(self, item) if isinstance(item, QueuedTask) else item
            for item in twin(self, *args, **kwargs)
        ]

    functools.update_wrapper(wrapped, twin)
    wrapped.__signature__ = inspect.signature(twin)  # type: ignore[attr-defined]
    shared = inspect.cleandoc(twin.__doc__ or "")
    wrapped.__doc__ = f"{shared}\n\nEach ``QueuedTask`` comes as a ``BlockingQueuedTask``."
    return wrapped


def _adopt_twins(cls: type) -> None:
    """Give the twins in ``cls`` its module and qualified name (``help()`` shows them)."""
    for name, value in vars(cls).items():
        if hasattr(value, "__blocking_twin_of__"):
            value.__qualname__ = f"{cls.__qualname__}.{name}"
            value.__module__ = cls.__module__
            if value.__annotations__.get("return") is _LateHandle:
                value.__annotations__["return"] = BlockingTaskRun
            if value.__annotations__.get("return") is _LateQueued:
                value.__annotations__["return"] = BlockingQueuedTask


class _Phase:
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class BlockingController:
    """A :class:`~chongming.Controller` on its own loop thread, driven by plain calls.

    ``controller_kwargs`` go to ``Controller`` unchanged (``max_parallel``,
    ``executor``, ``windows``, ...); a bad one raises before any thread starts.
    """

    def __init__(self, **controller_kwargs: Any) -> None:
        self._controller = Controller(**controller_kwargs)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._phase = _Phase.OPEN
        stack = contextlib.ExitStack()
        try:
            portal = stack.enter_context(start_blocking_portal("asyncio"))
            loop = portal.call(asyncio.get_running_loop)
            loop_thread = portal.call(threading.get_ident)
            # Calls still in flight once the controller has closed are cancelled,
            # so close() cannot hang on a caller that no longer gets an answer.
            stack.callback(_stop_portal, portal)
            # The controller is entered and left by one task on the loop, as any
            # async context manager must be.
            stack.enter_context(portal.wrap_async_context_manager(self._controller))
        except BaseException:
            stack.close()
            raise
        self._stack: contextlib.ExitStack | None = stack
        self._portal: BlockingPortal | None = portal
        self._loop: asyncio.AbstractEventLoop | None = loop
        self._loop_thread = loop_thread

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> BlockingController:
        self._require_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has started; no further call is accepted."""
        return self._phase != _Phase.OPEN

    @extends(Controller.close)
    def close(self, grace: float | None = None, *, close_store: bool | None = None) -> None:
        """Blocking: then the loop stops and its thread and idle worker threads
        are joined. Thread-safe: a second caller, concurrent or later, returns
        once the first one has finished closing. Called on the loop thread it
        raises ``RuntimeError`` (it would wait on itself).
        """
        if grace is not None and (
            isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0
        ):
            raise ConfigurationError(f"grace must be a number >= 0, got {grace!r}")
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError("close() would wait on itself: it was called on the loop thread")
        with self._lock:
            first = self._phase == _Phase.OPEN
            if first:
                self._phase = _Phase.CLOSING
        if not first:
            self._closed.wait()
            return
        stack, portal, loop = self._stack, self._portal, self._loop
        assert stack is not None
        assert portal is not None
        assert loop is not None
        try:
            portal.call(functools.partial(self._controller.close, grace, close_store=close_store))
        finally:
            try:
                stack.close()  # leaves the controller, stops the loop, joins its thread
            finally:
                _join_worker_threads(loop, self._controller.windows.cancel_window)
                self._stack = self._portal = self._loop = None
                self._phase = _Phase.CLOSED
                self._closed.set()

    # -- the bridge ------------------------------------------------------------------

    def _require_open(self) -> BlockingPortal:
        portal = self._portal
        if self._phase != _Phase.OPEN or portal is None:
            raise ControllerClosed("the blocking controller is closed; it accepts no more calls")
        return portal

    def _run(self, func: Callable[[], Awaitable[_T]]) -> _T:
        """Run a coroutine function on the loop thread; block until it ends."""
        portal = self._require_open()
        with self._closed_meanwhile():
            future = portal.start_task_soon(func)
        return self._result(future)

    def _run_sync(self, func: Callable[[], _T]) -> _T:
        """Run a plain function on the loop thread, where the controller's state lives."""
        portal = self._require_open()
        with self._closed_meanwhile():
            future = portal.start_task_soon(func)
        return self._result(future)

    @contextlib.contextmanager
    def _closed_meanwhile(self) -> Iterator[None]:
        try:
            yield
        except RuntimeError as error:
            if self._phase != _Phase.OPEN:  # the loop stopped after our check
                raise ControllerClosed("the blocking controller is closed") from error
            raise  # e.g. called from the loop thread itself

    def _result(self, future: concurrent.futures.Future[_T]) -> _T:
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._phase != _Phase.OPEN:  # cancelled by close()
                raise ControllerClosed("the blocking controller closed during the call") from None
            raise
        except BaseException:
            future.cancel()  # interrupted caller: nothing keeps running on its behalf
            raise

    def _read(self, func: Callable[[], _T]) -> _T:
        """Read a run's state: on the loop while it runs, directly once it has stopped."""
        if self._phase == _Phase.OPEN:
            try:
                return self._run_sync(func)
            except ControllerClosed:
                pass
        self._closed.wait()  # closing: the loop thread is about to end
        return func()

    @property
    def _bridge_target(self) -> Controller:
        return self._controller

    def _bridge_call(self, call: Callable[[], Any], /) -> Any:
        return self._run_sync(call)  # the portal awaits what ``call`` returns, if awaitable

    # -- the twins of the controller's methods -------------------------------------------

    register = loop_twin(Controller.register)
    register_module = loop_twin(Controller.register_module)
    run_for = _returning_handle(loop_twin(Controller.run_for))
    # mypy refuses ``self`` followed by ``*args`` in Concatenate, yet infers the right
    # ParamSpec (the twin is typed ``(name: str, *args: Any, task_id: ...) -> ...``).
    submit = _returning_handle(blocking_twin(Controller.submit))  # type: ignore[arg-type]
    enqueue = _returning_queued(blocking_twin(Controller.enqueue))  # type: ignore[arg-type]
    enqueue_many = _returning_queued_each(blocking_twin(Controller.enqueue_many))
    enqueue_pipeline = _returning_queued(blocking_twin(Controller.enqueue_pipeline))
    get = blocking_twin(Controller.get)
    history = blocking_twin(Controller.history)
    list_tasks = blocking_twin(Controller.list_tasks)
    stats = blocking_twin(Controller.stats)
    stop = blocking_twin(Controller.stop)
    pause = blocking_twin(Controller.pause)
    resume = blocking_twin(Controller.resume)
    stop_all = blocking_twin(Controller.stop_all)
    wait_all = blocking_twin(Controller.wait_all)
    reconcile = blocking_twin(Controller.reconcile)
    nodes = blocking_twin(Controller.nodes)
    bucket_report = blocking_twin(Controller.bucket_report)
    signal = blocking_twin(Controller.signal)
    facts = blocking_twin(Controller.facts)
    schedule = blocking_twin(Controller.schedule)
    schedules = blocking_twin(Controller.schedules)
    pause_schedule = blocking_twin(Controller.pause_schedule)
    resume_schedule = blocking_twin(Controller.resume_schedule)
    remove_schedule = blocking_twin(Controller.remove_schedule)
    trigger_schedule = _returning_queued(blocking_twin(Controller.trigger_schedule))

    def __repr__(self) -> str:
        return f"<BlockingController {self._phase} {self._controller!r}>"


class BlockingTaskRun:
    """The sync handle of one submitted task; every call is a bridge to the loop."""

    __slots__ = ("_owner", "_task_run", "task_id")

    def __init__(self, owner: BlockingController, run: TaskRun) -> None:
        self._owner = owner
        self._task_run = run
        self.task_id = run.task_id

    @property
    def _bridge_target(self) -> TaskRun:
        return self._task_run

    def _bridge_call(self, call: Callable[[], Any], /) -> Any:
        return self._owner._bridge_call(call)

    @property
    def snapshot(self) -> TaskSnapshot:
        """The latest state (the final one after close)."""
        run = self._task_run
        return self._owner._read(lambda: run.snapshot)

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """The history so far, oldest first."""
        run = self._task_run
        return self._owner._read(lambda: run.transitions)

    @extends(TaskRun.wait)
    def wait(self, timeout: float | None = None) -> Outcome:
        """Blocking: after the controller has closed the outcome is returned at
        once, since close leaves no task unfinished."""
        run = self._task_run
        if self._owner._phase == _Phase.OPEN:
            try:
                return self._owner._run(lambda: run.wait(timeout))
            except ControllerClosed:
                pass
        self._owner._closed.wait()
        outcome = self._owner._read(lambda: run.outcome)
        if outcome is None:
            raise ControllerClosed(f"the controller closed before task {self.task_id!r} ended")
        return outcome

    stop = blocking_twin(TaskRun.stop)
    force_stop = blocking_twin(TaskRun.force_stop)
    pause = blocking_twin(TaskRun.pause)
    resume = blocking_twin(TaskRun.resume)

    def __repr__(self) -> str:
        return f"<BlockingTaskRun {self.task_id!r}>"


class BlockingQueuedTask:
    """The sync handle of one enqueued task: it follows the task through the store."""

    __slots__ = ("_owner", "_queued", "created", "snapshot", "task_id")

    def __init__(self, owner: BlockingController, queued: QueuedTask) -> None:
        self._owner = owner
        self._queued = queued
        self.task_id = queued.task_id
        #: False when an idempotency key answered with a task enqueued earlier.
        self.created = queued.created
        #: The task as the store held it when ``enqueue`` returned.
        self.snapshot = queued.snapshot

    @property
    def _bridge_target(self) -> QueuedTask:
        return self._queued

    def _bridge_call(self, call: Callable[[], Any], /) -> Any:
        return self._owner._bridge_call(call)

    get = blocking_twin(QueuedTask.get)
    wait = blocking_twin(QueuedTask.wait)
    result = blocking_twin(QueuedTask.result)

    def __repr__(self) -> str:
        return f"<BlockingQueuedTask {self.task_id!r} created={self.created}>"


_adopt_twins(BlockingController)
_adopt_twins(BlockingTaskRun)
_adopt_twins(BlockingQueuedTask)


def _stop_portal(portal: BlockingPortal) -> None:
    try:
        portal.call(portal.stop, True)
    except RuntimeError:
        pass  # already stopped


def _join_worker_threads(loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    """Join the stopped loop's worker threads, for at most ``seconds`` in total.

    anyio tells its worker threads to exit when the loop's root task ends but
    does not join them; joining here is what lets ``close()`` promise that no
    thread is left behind. anyio (4.x) has no public way to list or join them:
    its ``WorkerThread`` class and the per-loop worker set are private. What
    its worker threads do expose is the loop they serve, as ``thread.loop``;
    a thread without that attribute, or serving another loop, is left alone.
    A worker still running an abandoned (``lost``) task is waited for up to
    the bound. Each wait is capped at ``threading.TIMEOUT_MAX``: any finite
    window is a valid setting, and ``Thread.join`` raises ``OverflowError``
    past that cap.
    """
    deadline = time.monotonic() + seconds
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is current or getattr(thread, "loop", None) is not loop:
            continue
        thread.join(min(max(0.0, deadline - time.monotonic()), threading.TIMEOUT_MAX))
