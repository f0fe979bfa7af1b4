"""A blocking facade over :class:`~chongming.Controller` for sync programs.

Scripts, Django views, Flask handlers and other plain-threaded code cannot
``await``. :class:`BlockingController` runs an event loop in a background
thread (anyio's blocking portal, asyncio backend), enters a ``Controller``
inside it, and offers the same operations as **sync bridges**: each method
hands the matching call to the loop thread and blocks the calling thread until
the loop answers. Nothing here is a coroutine::

    with BlockingController(max_parallel=4) as controller:
        controller.register("extract", extract)
        run = controller.submit("extract", "2026-10-02", task_id="job-1")
        outcome = run.wait(timeout=60)

Threads. Every method may be called from any number of plain threads at once.
A sync task running under this controller may call it too (it runs in a
worker thread, not on the loop). The loop thread itself must not: an
``async def`` task holds the async ``Controller`` API instead.

Lifetime. The loop thread starts when the facade is constructed and ends at
:meth:`BlockingController.close` (or when the ``with`` block exits): the
controller closes gracefully, the loop stops, its thread is joined, and the
loop's idle worker threads are joined too. The one thread that can outlive
``close()`` is one whose task ignored a stop: a thread cannot be killed, so
the task was recorded ``lost`` and its thread finishes in its own time.
``close()`` is idempotent and may be called from several threads at once
(each returns once the controller is closed); any use after it raises
:class:`~chongming.ControllerClosed`. A run handle stays readable after close:
its snapshot, history and outcome are the record of what happened.

Timeouts and interruption. ``wait(timeout=...)`` and ``wait_all(timeout=...)``
raise :class:`TimeoutError` when the end was not seen in time; that changes
nothing about the tasks. If the calling thread is interrupted while it blocks
(``KeyboardInterrupt``), the pending call is cancelled on the loop, with the
same effect as cancelling the async call: a wait leaves the task alone, and a
stop or pause already requested stays requested.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Iterator
from types import ModuleType, TracebackType
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from chongming.controller.controller import Controller
from chongming.controller.statistics import ControllerStats
from chongming.errors import ConfigurationError, ControllerClosed
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.run.outcome import Outcome
from chongming.run.task_run import TaskRun
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.task_api.spec import ExecutorChoice, TaskSpec

__all__ = ["BlockingController", "BlockingTaskRun"]

_T = TypeVar("_T")


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

    def close(self, grace: float | None = None) -> None:
        """Close the controller (see ``Controller.close``), stop the loop, join its threads.

        Idempotent and thread-safe: a second caller, concurrent or later,
        returns once the first one has finished closing.
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
            portal.call(self._controller.close, grace)
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

    # -- registration ----------------------------------------------------------------

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        tags: Collection[str] | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        executor: ExecutorChoice | None = None,
        priority: int | None = None,
    ) -> TaskSpec:
        """Allow ``fn`` to be submitted as ``name`` (see ``Controller.register``)."""
        return self._run_sync(
            functools.partial(
                self._controller.register,
                name,
                fn,
                tags=tags,
                retry=retry,
                timeout=timeout,
                executor=executor,
                priority=priority,
            )
        )

    def register_module(self, module: ModuleType) -> list[str]:
        """Register every ``@task`` function defined in ``module``."""
        return self._run_sync(functools.partial(self._controller.register_module, module))

    # -- submit and read ---------------------------------------------------------------

    def submit(
        self,
        name: str,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        tags: Collection[str] | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        **kwargs: Any,
    ) -> BlockingTaskRun:
        """Accept a task (see ``Controller.submit``); it is queued or started on return."""
        run = self._run(
            functools.partial(
                self._controller.submit,
                name,
                *args,
                task_id=task_id,
                label=label,
                bucket_key=bucket_key,
                priority=priority,
                tags=tags,
                retry=retry,
                timeout=timeout,
                **kwargs,
            )
        )
        return BlockingTaskRun(self, run)

    def run_for(self, task_id: str) -> BlockingTaskRun:
        """The handle of a task this controller holds; ``TaskNotFound`` if unknown."""
        return BlockingTaskRun(self, self._run_sync(lambda: self._controller.run_for(task_id)))

    def get(self, task_id: str) -> TaskSnapshot:
        """The task's latest snapshot; ``TaskNotFound`` if unknown."""
        return self._run(lambda: self._controller.get(task_id))

    def history(self, task_id: str) -> list[Transition]:
        return self._run(lambda: self._controller.history(task_id))

    def list_tasks(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        """Snapshots matching ``query``, oldest first."""
        return self._run(lambda: self._controller.list_tasks(query))

    def stats(self) -> ControllerStats:
        return self._run(self._controller.stats)

    # -- control -----------------------------------------------------------------------

    def stop(self, task_id: str, *, reason: str | None = None, actor: str = "user") -> bool:
        """Ask a task to stop; whether a request was issued (see ``TaskRun.stop``)."""
        return self._run(lambda: self._controller.stop(task_id, reason=reason, actor=actor))

    def pause(self, task_id: str, *, actor: str = "user") -> bool:
        """Pause at the next checkpoint; ``False`` (rolled back) if not reached in time."""
        return self._run(lambda: self._controller.pause(task_id, actor=actor))

    def resume(self, task_id: str, *, actor: str = "user") -> bool:
        return self._run(lambda: self._controller.resume(task_id, actor=actor))

    def stop_all(self, *, reason: str | None = None, actor: str = "user") -> int:
        """Ask every unfinished task to stop; how many requests were issued."""
        return self._run(lambda: self._controller.stop_all(reason=reason, actor=actor))

    def wait_all(self, timeout: float | None = None) -> list[Outcome]:
        """Block until every task known now has ended; ``TimeoutError`` changes nothing."""
        return self._run(lambda: self._controller.wait_all(timeout))

    def __repr__(self) -> str:
        return f"<BlockingController {self._phase} {self._controller!r}>"


class BlockingTaskRun:
    """The sync handle of one submitted task; every call is a bridge to the loop."""

    __slots__ = ("_owner", "_run", "task_id")

    def __init__(self, owner: BlockingController, run: TaskRun) -> None:
        self._owner = owner
        self._run = run
        self.task_id = run.task_id

    @property
    def snapshot(self) -> TaskSnapshot:
        """The latest state (the final one after close)."""
        run = self._run
        return self._owner._read(lambda: run.snapshot)

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """The history so far, oldest first."""
        run = self._run
        return self._owner._read(lambda: run.transitions)

    def wait(self, timeout: float | None = None) -> Outcome:
        """Block until the task ends and return its outcome.

        Raises :class:`TimeoutError` when the end was not seen within
        ``timeout`` seconds; the task is not touched. After close the outcome
        is returned at once (close leaves no task unfinished).
        """
        run = self._run
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

    def stop(self, *, reason: str | None = None, actor: str = "user") -> bool:
        """Ask the task to stop; whether a request was issued. :meth:`wait` sees the end."""
        run = self._run
        return self._owner._run(lambda: run.stop(reason=reason, actor=actor))

    def pause(self, *, actor: str = "user") -> bool:
        """Pause at the next checkpoint; ``False`` (rolled back) if not reached in time."""
        run = self._run
        return self._owner._run(lambda: run.pause(actor=actor))

    def resume(self, *, actor: str = "user") -> bool:
        run = self._run
        return self._owner._run(lambda: run.resume(actor=actor))

    def __repr__(self) -> str:
        return f"<BlockingTaskRun {self.task_id!r}>"


def _stop_portal(portal: BlockingPortal) -> None:
    try:
        portal.call(portal.stop, True)
    except RuntimeError:
        pass  # already stopped


def _join_worker_threads(loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    """Join the stopped loop's worker threads, for at most ``seconds`` in total.

    anyio tells its worker threads to exit when the loop's root task ends but
    does not join them; joining here is what lets ``close()`` promise that no
    thread is left behind. anyio's worker threads keep their loop as
    ``thread.loop``; a thread that is not one of them is left alone. A worker
    still running an abandoned (``lost``) task is waited for up to the bound.
    """
    deadline = time.monotonic() + seconds
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is current or getattr(thread, "loop", None) is not loop:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
