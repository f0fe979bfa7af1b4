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

Twins. Every public coroutine of ``Controller`` and ``TaskRun`` has a blocking
twin here, generated from it by :func:`blocking_twin`
(:mod:`chongming.blocking.twins`): the same parameters, annotations and
docstring (for ``help()``, ``inspect.signature`` and mypy, through a
``ParamSpec``), so the facade cannot drift from what it mirrors. A parity
test discovers the coroutines by inspection and fails when one has no twin.
``close`` and ``wait`` are written by hand (they add behaviour after the loop
has stopped) and keep the async signature and docstring, extended.
``Controller.start`` has none: the facade starts the controller when built.
The facade and its handles are :mod:`chongming.blocking.facade`.

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

from chongming.blocking.facade import BlockingController as BlockingController
from chongming.blocking.facade import BlockingQueuedTask as BlockingQueuedTask
from chongming.blocking.facade import BlockingTaskRun as BlockingTaskRun
from chongming.blocking.twins import blocking_twin as blocking_twin
from chongming.blocking.twins import loop_twin as loop_twin

__all__ = [
    "BlockingController",
    "BlockingQueuedTask",
    "BlockingTaskRun",
    "blocking_twin",
    "loop_twin",
]
