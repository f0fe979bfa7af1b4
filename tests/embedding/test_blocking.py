"""The blocking facade, driven from plain threads as a script or a WSGI app would."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import types
from collections.abc import Callable, Iterator

import pytest

from chongming import (
    ConfigurationError,
    ControllerClosed,
    ControlWindows,
    DuplicateTask,
    TaskContext,
    TaskNotFound,
    TaskQuery,
    TaskStatus,
    UnknownTask,
    task,
)
from chongming.blocking import BlockingController, BlockingTaskRun

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)
BOUND = 10.0  # seconds: every wait in this file is bounded by this


@pytest.fixture(autouse=True)
def no_thread_left_behind() -> Iterator[None]:
    """Every test ends with exactly the threads it started with."""
    before = set(threading.enumerate())
    yield
    left = [thread for thread in threading.enumerate() if thread not in before]
    assert left == [], f"threads left behind: {left}"


def wait_until(condition: Callable[[], bool], timeout: float = BOUND) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.002)


def gated(ctx: TaskContext, gate: str, value: int) -> int:
    """Holds its slot until the test opens the named gate; stoppable meanwhile."""
    GATES[gate].started.release()
    while not GATES[gate].open.wait(0.005):
        ctx.checkpoint()
    return value * 2


def forever(ctx: TaskContext) -> None:
    while True:
        ctx.checkpoint()
        time.sleep(0.002)


class Gate:
    def __init__(self) -> None:
        self.open = threading.Event()
        self.started = threading.Semaphore(0)

    def wait_started(self, count: int) -> None:
        for _ in range(count):
            assert self.started.acquire(timeout=BOUND), "a task did not start"


GATES: dict[str, Gate] = {}


@pytest.fixture
def gate(request: pytest.FixtureRequest) -> Iterator[str]:
    name = request.node.name
    GATES[name] = Gate()
    yield name
    GATES.pop(name).open.set()


def test_queueing_holds_back_what_exceeds_max_parallel(gate: str) -> None:
    with BlockingController(max_parallel=2, windows=FAST) as controller:
        controller.register("gated", gated)
        runs = [controller.submit("gated", gate, n, task_id=f"job-{n}") for n in range(4)]
        GATES[gate].wait_started(2)
        statuses = [snapshot.status for snapshot in controller.list_tasks()]
        assert statuses == [S.RUNNING, S.RUNNING, S.QUEUED, S.QUEUED]
        stats = controller.stats()
        assert (stats.holding_slot, stats.queued, stats.max_parallel) == (2, 2, 2)
        assert controller.get("job-3").status is S.QUEUED

        GATES[gate].open.set()
        outcomes = controller.wait_all(timeout=BOUND)
    assert [outcome.value for outcome in outcomes] == [0, 2, 4, 6]
    assert all(run.snapshot.status is S.SUCCEEDED for run in runs)


def test_eight_threads_submit_and_wait_at_once(gate: str) -> None:
    threads_count, per_thread = 8, 5
    barrier = threading.Barrier(threads_count)
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    with BlockingController(max_parallel=3, windows=FAST) as controller:
        controller.register("gated", gated)

        def client(index: int) -> None:
            try:
                barrier.wait(BOUND)
                runs = [
                    controller.submit("gated", gate, index * 100 + n, task_id=f"t{index}-{n}")
                    for n in range(per_thread)
                ]
                results[index] = [run.wait(BOUND).value for run in runs]
            except BaseException as error:  # reported by the test thread below
                errors.append(error)

        clients = [threading.Thread(target=client, args=(i,)) for i in range(threads_count)]
        for thread in clients:
            thread.start()
        GATES[gate].wait_started(3)
        # Every submission is accepted; only max_parallel of them hold a slot.
        wait_until(lambda: controller.stats().total == threads_count * per_thread)
        stats = controller.stats()
        assert stats.holding_slot == 3
        assert stats.queued == threads_count * per_thread - 3
        GATES[gate].open.set()
        for thread in clients:
            thread.join(BOUND)
        assert errors == []
        assert controller.stats().by_status == {"succeeded": threads_count * per_thread}
    assert results == {
        i: [(i * 100 + n) * 2 for n in range(per_thread)] for i in range(threads_count)
    }


def test_stop_pause_resume_by_handle_and_by_id() -> None:
    with BlockingController(max_parallel=2, windows=FAST) as controller:
        controller.register("forever", forever)
        first = controller.submit("forever", task_id="first")
        second = controller.submit("forever", task_id="second")
        wait_until(lambda: first.snapshot.status is S.RUNNING)
        wait_until(lambda: second.snapshot.status is S.RUNNING)

        assert first.pause() is True
        paused = first.snapshot
        assert paused.status is S.PAUSED
        assert controller.stats().holding_slot == 2  # a paused task keeps its slot
        assert first.resume() is True
        resumed = first.snapshot
        assert resumed.status is S.RUNNING
        assert first.stop(reason="enough") is True
        assert first.wait(BOUND).status is S.STOPPED

        assert controller.pause("second") is True
        assert controller.resume("second") is True
        assert controller.stop("second", reason="by id") is True
        assert controller.stop("second") is False  # already stopping or stopped
        assert second.wait(BOUND).status is S.STOPPED

    assert [(t.from_status, t.to_status) for t in first.transitions[3:]] == [
        (S.RUNNING, S.PAUSING),
        (S.PAUSING, S.PAUSED),
        (S.PAUSED, S.RUNNING),
        (S.RUNNING, S.STOPPING),
        (S.STOPPING, S.STOPPED),
    ]
    assert first.transitions[-2].reason == "enough"
    assert [t.trigger for t in second.transitions][-2:] == ["user:stop", "runtime:stop_confirmed"]


def test_wait_timeout_raises_and_leaves_the_task_alone() -> None:
    with BlockingController(max_parallel=1, windows=FAST) as controller:
        controller.register("forever", forever)
        run = controller.submit("forever")
        wait_until(lambda: run.snapshot.status is S.RUNNING)
        version = run.snapshot.status_version
        with pytest.raises(TimeoutError):
            run.wait(timeout=0.05)
        with pytest.raises(TimeoutError):
            controller.wait_all(timeout=0.05)
        after = run.snapshot
        assert (after.status, after.status_version) == (S.RUNNING, version)
        assert controller.stop_all(reason="done") == 1
        assert run.wait(BOUND).status is S.STOPPED


def test_typed_errors_cross_the_bridge() -> None:
    with BlockingController(windows=FAST) as controller:
        controller.register("forever", forever)
        with pytest.raises(UnknownTask, match="registered names: forever"):
            controller.submit("nope")
        run = controller.submit("forever", task_id="only")
        with pytest.raises(DuplicateTask):
            controller.submit("forever", task_id="only")
        with pytest.raises(TaskNotFound):
            controller.get("missing")
        with pytest.raises(ConfigurationError):
            controller.register("forever", forever)  # a name is registered once
        with pytest.raises(ConfigurationError):
            run.wait(timeout=-1)
        assert [s.task_id for s in controller.list_tasks(TaskQuery(name="forever"))] == ["only"]
    assert run.snapshot.status is S.STOPPED  # closing stopped it


def test_bad_configuration_fails_before_any_thread_starts() -> None:
    before = set(threading.enumerate())
    with pytest.raises(ConfigurationError):
        BlockingController(max_parallel=0)
    assert set(threading.enumerate()) == before


def test_close_is_idempotent_and_concurrent_closers_all_wait_for_the_end() -> None:
    controller = BlockingController(max_parallel=2, windows=FAST)
    controller.register("forever", forever)
    runs = [controller.submit("forever") for _ in range(3)]
    wait_until(lambda: runs[0].snapshot.status is S.RUNNING)

    seen_at_return: list[list[TaskStatus]] = []
    barrier = threading.Barrier(4)

    def closer() -> None:
        barrier.wait(BOUND)
        controller.close(grace=0.05)
        seen_at_return.append([run.snapshot.status for run in runs])

    closers = [threading.Thread(target=closer) for _ in range(4)]
    for thread in closers:
        thread.start()
    for thread in closers:
        thread.join(BOUND)
    assert len(seen_at_return) == 4
    # No closer returned before every task had ended.
    for statuses in seen_at_return:
        assert all(status.is_terminal for status in statuses), statuses
    assert seen_at_return[0] == [S.STOPPED, S.STOPPED, S.STOPPED]
    controller.close()
    controller.close(grace=1)
    assert controller.closed


def test_use_after_close_raises_controller_closed_but_runs_stay_readable() -> None:
    with BlockingController(windows=FAST) as controller:
        controller.register("forever", forever)
        run = controller.submit("forever", task_id="kept")
    assert run.snapshot.status is S.STOPPED
    assert run.wait().status is S.STOPPED
    assert run.transitions[-1].trigger == "runtime:stop_confirmed"
    calls: list[Callable[[], object]] = [
        lambda: controller.submit("forever"),
        lambda: controller.register("other", forever),
        lambda: controller.get("kept"),
        lambda: controller.list_tasks(),
        lambda: controller.stats(),
        lambda: controller.stop("kept"),
        lambda: controller.wait_all(),
        lambda: run.stop(),
        lambda: run.pause(),
    ]
    for call in calls:
        with pytest.raises(ControllerClosed):
            call()
    with pytest.raises(ControllerClosed), controller:
        pass


def test_leaving_the_with_block_by_an_exception_still_closes(gate: str) -> None:
    seen: dict[str, object] = {}

    def script() -> None:
        with BlockingController(max_parallel=1, windows=FAST) as controller:
            seen["controller"] = controller
            controller.register("gated", gated)
            seen["running"] = controller.submit("gated", gate, 1)
            seen["queued"] = controller.submit("gated", gate, 2)
            GATES[gate].wait_started(1)
            raise KeyError("the script failed")

    with pytest.raises(KeyError):
        script()
    controller, running, queued = seen["controller"], seen["running"], seen["queued"]
    assert isinstance(controller, BlockingController)
    assert isinstance(running, BlockingTaskRun)
    assert isinstance(queued, BlockingTaskRun)
    assert controller.closed
    assert running.snapshot.status is S.STOPPED
    assert queued.snapshot.status is S.STOPPED
    assert queued.snapshot.started_at is None  # it never ran


def test_a_sync_task_may_use_the_facade_from_its_worker_thread() -> None:
    with BlockingController(max_parallel=2, windows=FAST) as controller:

        def double(ctx: TaskContext, n: int) -> int:
            return n * 2

        def fan_out(ctx: TaskContext, n: int) -> list[int]:
            children = [controller.submit("double", i) for i in range(n)]
            return [child.wait(BOUND).value for child in children]

        controller.register("double", double)
        controller.register("fan_out", fan_out)
        outcome = controller.submit("fan_out", 3).wait(BOUND)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == [0, 2, 4]


def test_close_joins_a_worker_thread_that_finishes_an_abandoned_task() -> None:
    """A thread that ignores a stop is recorded ``lost``; if it ends within the
    cancel window, close() has joined it by the time it returns."""
    windows = ControlWindows(stop_grace=0.1, cancel_window=3.0, pause_window=0.5)
    entered = threading.Event()

    def deaf(ctx: TaskContext, seconds: float) -> str:
        entered.set()
        time.sleep(seconds)  # no checkpoint: the stop request goes unheard
        return "finished anyway"

    before = set(threading.enumerate())
    with BlockingController(windows=windows) as controller:
        controller.register("deaf", deaf)
        run = controller.submit("deaf", 0.6)
        assert entered.wait(BOUND)
    assert set(threading.enumerate()) == before  # joined, not merely told to exit
    assert run.snapshot.status is S.LOST
    assert run.transitions[-1].trigger == "runtime:stop_abandoned"


class Interrupted(Exception):
    """Raised by the test's SIGINT handler instead of KeyboardInterrupt."""


def test_an_interrupted_wait_leaves_the_task_alone_and_nothing_on_the_loop() -> None:
    assert threading.current_thread() is threading.main_thread()

    def on_sigint(signum: int, frame: object) -> None:
        raise Interrupted

    def loop_tasks(controller: BlockingController) -> int:
        # The facade's loop, inspected from inside: how many asyncio tasks exist.
        return controller._run_sync(lambda: len(asyncio.all_tasks()))

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with BlockingController(windows=FAST) as controller:
            controller.register("forever", forever)
            run = controller.submit("forever")
            wait_until(lambda: run.snapshot.status is S.RUNNING)
            baseline = loop_tasks(controller)
            sender = threading.Timer(
                0.2, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)
            )
            sender.start()
            try:
                with pytest.raises(Interrupted):
                    run.wait(timeout=3 * BOUND)  # blocks until the signal arrives
            finally:
                sender.join(BOUND)
            assert run.snapshot.status is S.RUNNING  # the task did not notice
            wait_until(lambda: loop_tasks(controller) == baseline)  # no orphaned waiter
            assert run.stop() is True
            assert run.wait(BOUND).status is S.STOPPED
    finally:
        signal.signal(signal.SIGINT, previous)


def double(ctx: TaskContext, n: int) -> int:
    return n * 2


def test_a_cancel_window_longer_than_a_thread_can_wait_still_closes() -> None:
    """Any finite window is valid, but ``Thread.join`` refuses one past TIMEOUT_MAX.

    A worker thread still finishing an abandoned task is alive when close()
    joins it, so the join really happens (an idle worker may exit first).
    """
    windows = ControlWindows(stop_grace=0.1, cancel_window=1e12, pause_window=0.5)
    entered = threading.Event()

    def deaf(ctx: TaskContext) -> str:
        entered.set()
        time.sleep(0.4)  # no checkpoint: the stop goes unheard and the task is lost
        return "finished anyway"

    before = set(threading.enumerate())
    with BlockingController(windows=windows) as controller:
        controller.register("deaf", deaf)
        run = controller.submit("deaf")
        assert entered.wait(BOUND)
    assert controller.closed
    assert run.snapshot.status is S.LOST
    assert set(threading.enumerate()) == before  # joined, within the (capped) window


def test_every_twin_crosses_the_bridge() -> None:
    """The generated twins call the same-named method on the loop, with every argument."""
    module = types.ModuleType("blocking_twin_tasks")

    def tripled(ctx: TaskContext, n: int) -> int:
        return n * 3

    tripled.__module__ = module.__name__  # as if defined there
    setattr(module, "tripled", task(name="tripled")(tripled))  # noqa: B010
    with BlockingController(windows=FAST) as controller:
        assert controller.register_module(module) == ["tripled"]
        spec = controller.register("forever", forever, tags={"loop"})
        assert spec.tags == frozenset({"loop"})
        run = controller.submit("forever", task_id="twin", label="all the twins")
        assert isinstance(run, BlockingTaskRun)
        wait_until(lambda: run.snapshot.status is S.RUNNING)
        same = controller.run_for("twin")
        assert (type(same), same.task_id) == (BlockingTaskRun, "twin")
        assert same.pause(actor="ops", reason="maintenance") is True
        assert same.resume(reason="done") is True
        assert run.stop(reason="enough") is True
        assert run.wait(BOUND).status is S.STOPPED
        history = controller.history("twin")
        assert [(t.to_status, t.actor, t.reason) for t in history[3:6]] == [
            (S.PAUSING, "ops", "maintenance"),
            (S.PAUSED, "system", None),
            (S.RUNNING, "user", "done"),
        ]
        assert controller.get("twin").label == "all the twins"
        assert controller.submit("tripled", 4).wait(BOUND).value == 12
        with pytest.raises(TaskNotFound):
            controller.run_for("missing")
