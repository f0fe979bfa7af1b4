"""A Hypothesis model of durable work on a shared plane, under deploys (issue 22).

The paths of a deploy were each tested alone: a worker closed with a grace
(``close(grace)``, as SIGTERM does) hands its durable tasks back, a stop
reaches a task wherever it is held, a fact wakes its waiter. Here they are
mixed at random: durable flows of one to three steps, some waiting for a
fact between steps, some held at a gate between steps, are enqueued by a
client onto one shared store, while up to three workers start and close,
the client stops tasks, sends facts and opens gates. It checks:

- a step's body never runs again once its ``ctx.step`` returned (a body cut
  by a close before its record was kept may run again, at least once; the
  model counts those cuts and allows exactly one more run for each);
- once settled, no task is held by a worker that has closed, and the
  client's counts are the store's: one task per enqueue, by status and owner;
- at the end, with every gate open and a worker up, every task ends: those
  never stopped ``succeeded`` with the right result in attempt 1 (a hand-back
  is no retry), the rest ``succeeded`` or ``stopped``; every history is legal.

Everything runs on one event loop per example (an ``asyncio.Runner``); the
store is one in-memory store object shared by every node, as a database is.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from chongming import Controller, InMemoryTaskStore, TaskContext, TaskStatus, TaskStore
from chongming.policies import ControlWindows
from chongming.state import audit_history
from chongming.state.triggers import Trigger
from tests.tiers import examples

S = TaskStatus
WINDOWS = ControlWindows(stop_grace=0.05, cancel_window=0.05, pause_window=0.2)
POLL = 0.02
#: A settled plane: closed workers' tasks back in the queue, counts agreeing.
SETTLE_BOUND = 5.0
#: Once every gate is open and a worker is up, every task ends within this.
END_BOUND = 20.0
MAX_WORKERS = 3

_ids = itertools.count()


class Flow:
    """What one enqueued flow does, and what its step bodies did."""

    def __init__(self, key: str, steps: int, fact: bool) -> None:
        self.key = key
        self.steps = steps
        self.fact = fact
        self.gates = [asyncio.Event() for _ in range(steps)]
        self.started: Counter[int] = Counter()  # body runs begun, per step
        self.returned: set[int] = set()  # steps whose ctx.step returned
        self.in_body: Counter[int] = Counter()  # bodies running now
        self.cut: Counter[int] = Counter()  # bodies cancelled before they returned
        self.runs: list[tuple[str, int]] = []  # (worker, step) of every body run
        self.stopped_by_client = False

    @property
    def expected(self) -> int:
        return sum(range(self.steps)) + (7 if self.fact else 0)


FLOWS: dict[str, Flow] = {}


async def body(key: str, index: int, owner: str) -> int:
    flow = FLOWS[key]
    flow.started[index] += 1
    flow.runs.append((owner, index))
    flow.in_body[index] += 1
    try:
        await asyncio.sleep(0.01)  # a real wait: a close or a stop may cut the body here
    except asyncio.CancelledError:
        flow.cut[index] += 1  # it did not finish: the next attempt may run it again
        raise
    finally:
        flow.in_body[index] -= 1
    return index


def flow_on(owner: str) -> Callable[..., Coroutine[Any, Any, int]]:
    """The durable flow as ``owner`` runs it (its bodies say where they ran)."""

    async def durable_flow(ctx: TaskContext, key: str) -> int:
        flow = FLOWS[key]
        total = 0
        for index in range(flow.steps):
            total += await ctx.step(f"s{index}", body, key, index, owner)
            flow.returned.add(index)
            await flow.gates[index].wait()  # work between steps: cancelled by a close
            if flow.fact and index == 0:
                total += int(await ctx.wait_for_fact("go", timeout=60))
        return total

    return durable_flow


def _run(runner: asyncio.Runner, coro: Coroutine[Any, Any, Any]) -> Any:
    return runner.run(coro)


async def _settle(check: Callable[[], Coroutine[Any, Any, bool]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL)
    return True


class PlaneModel(RuleBasedStateMachine):
    """Every node shares one in-memory store object."""

    def open_store(self) -> TaskStore | str:
        return self.store

    @initialize()
    def open_plane(self) -> None:
        FLOWS.clear()
        self.runner = asyncio.Runner()
        self.store: TaskStore = InMemoryTaskStore()
        self.workers: dict[str, Controller] = {}
        self.closed: set[str] = set()
        self.trace: list[str] = []  # the rules run: a timing-dependent failure cannot be replayed
        self.client = Controller(store=self.open_store(), owner="client", poll_interval=POLL)
        _run(self.runner, self.client.start())
        self._start_worker()

    def _start_worker(self) -> None:
        owner = f"w-{next(_ids)}"
        node = Controller(
            store=self.open_store(),
            owner=owner,
            work=True,
            poll_interval=POLL,
            windows=WINDOWS,
            reconcile_interval=60,
        )
        node.register("flow", flow_on(owner), durable=True)
        _run(self.runner, node.start())
        self.workers[owner] = node
        self.trace.append(f"start {owner}")

    # -- rules -------------------------------------------------------------------

    @rule(steps=st.integers(1, 3), fact=st.booleans())
    def enqueue(self, steps: int, fact: bool) -> None:
        key = f"f-{next(_ids)}"
        FLOWS[key] = Flow(key, steps, fact)
        self.trace.append(f"enqueue {key} steps={steps} fact={fact}")
        _run(self.runner, self.client.enqueue("flow", key, task_id=key))

    @precondition(lambda self: len(self.workers) < MAX_WORKERS)
    @rule()
    def start_worker(self) -> None:
        self._start_worker()

    @precondition(lambda self: bool(self.workers))
    @rule(data=st.data(), grace=st.sampled_from([0.0, 0.05]))
    def close_worker(self, data: st.DataObject, grace: float) -> None:
        owner = data.draw(st.sampled_from(sorted(self.workers)), label="worker")
        node = self.workers.pop(owner)
        self.trace.append(f"close {owner} grace={grace} running={self._running()}")
        _run(self.runner, node.close(grace))
        self.closed.add(owner)

    @precondition(lambda self: bool(FLOWS))
    @rule(data=st.data())
    def open_gate(self, data: st.DataObject) -> None:
        flow = FLOWS[data.draw(st.sampled_from(sorted(FLOWS)), label="flow")]
        closed = [gate for gate in flow.gates if not gate.is_set()]
        if closed:
            closed[0].set()
        self.trace.append(f"open a gate of {flow.key} ({len(closed)} were shut)")
        self._let_the_loop_run()

    @precondition(lambda self: any(flow.fact for flow in FLOWS.values()))
    @rule(data=st.data())
    def send_fact(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(k for k, f in FLOWS.items() if f.fact)))
        self.trace.append(f"signal {key}")
        _run(self.runner, self.client.signal(key, "go", 7))

    @precondition(lambda self: bool(FLOWS))
    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        flow = FLOWS[data.draw(st.sampled_from(sorted(FLOWS)), label="flow")]
        flow.stopped_by_client = True
        self.trace.append(f"stop {flow.key}")
        _run(self.runner, self.client.stop(flow.key, reason="model"))

    def _explain(self, flow: Flow, index: int) -> str:
        history = _run(self.runner, self.client.history(flow.key))
        moves = [(t.to_status.value, t.trigger, t.actor) for t in history]
        return (
            f"step {index} of {flow.key} ran {flow.started[index]} times (cut {flow.cut[index]}):"
            f" runs={flow.runs} trace={self.trace} history={moves}"
        )

    def _running(self) -> dict[str, dict[int, int]]:
        return {k: {i: n for i, n in f.in_body.items() if n} for k, f in FLOWS.items()}

    def _let_the_loop_run(self) -> None:
        _run(self.runner, asyncio.sleep(POLL))

    # -- invariants --------------------------------------------------------------

    @invariant()
    def no_step_body_runs_again_after_its_step_returned(self) -> None:
        for flow in FLOWS.values():
            for index, runs in flow.started.items():
                assert runs <= 1 + flow.cut[index], self._explain(flow, index)

    @invariant()
    def a_settled_plane_holds_nothing_on_closed_workers_and_counts_agree(self) -> None:
        if not hasattr(self, "client"):
            return
        assert _run(self.runner, _settle(self._agrees, SETTLE_BOUND)), self._describe()

    async def _agrees(self) -> bool:
        rows = await self.client.list_tasks()
        if len(rows) != len(FLOWS):
            return False
        if any(row.owner in self.closed and not row.status.is_terminal for row in rows):
            return False
        stats = await self.client.stats()
        by_status = Counter(row.status.value for row in rows)
        by_owner = Counter(row.owner or "" for row in rows)
        return (
            stats.total == len(rows)
            and dict(stats.by_status) == dict(by_status)
            and dict(stats.by_owner) == dict(by_owner)
        )

    def _describe(self) -> str:
        rows = _run(self.runner, self.client.list_tasks())
        stats = _run(self.runner, self.client.stats())
        return f"rows={[(r.task_id, r.status, r.owner) for r in rows]} stats={stats}"

    # -- the end -----------------------------------------------------------------

    def teardown(self) -> None:
        if not hasattr(self, "runner"):
            return
        try:
            self._finish()
        finally:
            for node in list(self.workers.values()):
                _run(self.runner, node.close(0.5))
            _run(self.runner, self.client.close(0.5))
            self.runner.close()
            self.cleanup()

    def cleanup(self) -> None:
        pass

    def _finish(self) -> None:
        for flow in FLOWS.values():
            for gate in flow.gates:
                gate.set()
            if flow.fact:
                _run(self.runner, self.client.signal(flow.key, "go", 7))
        if not self.workers:
            self._start_worker()

        async def all_ended() -> bool:
            rows = await self.client.list_tasks()
            return all(row.status.is_terminal for row in rows)

        assert _run(self.runner, _settle(all_ended, END_BOUND)), self._describe()
        for flow in FLOWS.values():
            snapshot = _run(self.runner, self.client.get(flow.key))
            history = _run(self.runner, self.client.history(flow.key))
            assert audit_history(snapshot, history) == [], (flow.key, history)
            triggers = {t.trigger for t in history}
            event(f"a flow ended {snapshot.status.value}")
            if Trigger.HANDED_BACK in triggers:
                event("a flow was handed back by a closing worker")
            if any(flow.cut.values()):
                event("a close cut a step body")
            if flow.stopped_by_client:
                assert snapshot.status in (S.SUCCEEDED, S.STOPPED), (flow.key, snapshot)
            else:
                assert snapshot.status is S.SUCCEEDED, (flow.key, snapshot, history)
                assert snapshot.attempt == 1, (flow.key, snapshot)
            if snapshot.status is S.SUCCEEDED:
                assert snapshot.result == flow.expected, (flow.key, snapshot.result)
                assert flow.returned == set(range(flow.steps))
            for index, runs in flow.started.items():
                assert runs <= 1 + flow.cut[index], self._explain(flow, index)


PlaneModel.TestCase.settings = settings(
    max_examples=examples(40),
    stateful_step_count=16,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class SqlitePlaneModel(PlaneModel):
    """Every node opens the same SQLite file, as worker processes do: writes take real time."""

    def open_store(self) -> TaskStore | str:
        if not hasattr(self, "folder"):
            self.folder = tempfile.TemporaryDirectory(prefix="plane-model-")
        return str(Path(self.folder.name) / "plane.db")

    def cleanup(self) -> None:
        self.folder.cleanup()


SqlitePlaneModel.TestCase.settings = settings(
    max_examples=examples(10),
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.slow
class TestPlaneModel(PlaneModel.TestCase):  # type: ignore[misc,valid-type]
    pass


@pytest.mark.slow
class TestSqlitePlaneModel(SqlitePlaneModel.TestCase):  # type: ignore[misc,valid-type]
    pass
