"""A Hypothesis model that drives real runs with random operations.

After every step, every run's record must hold: each transition is in the
table, ``status_version`` grows by exactly one per transition, terminal states
absorb, and the snapshot equals the fold of the history.
"""

from __future__ import annotations

import asyncio
import itertools
import time

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from chongming import (
    ControlWindows,
    ExponentialBackoff,
    RetryPolicy,
    TaskRun,
    Timeout,
)
from chongming.state import TRANSITIONS, audit_history
from tests.tiers import examples

MAILBOX: dict[str, list[str]] = {}
WINDOWS = ControlWindows(stop_grace=0.2, cancel_window=0.2, pause_window=0.05)
_ids = itertools.count()


async def scripted(ctx, key: str) -> int:  # type: ignore[no-untyped-def]
    box = MAILBOX[key]
    while True:
        await ctx.checkpoint()
        order = box.pop(0) if box else None
        if order == "return":
            return int(ctx.attempt)
        if order == "raise":
            raise RuntimeError("scripted failure")
        await asyncio.sleep(0.002)


def scripted_thread(ctx, key: str) -> int:  # type: ignore[no-untyped-def]
    box = MAILBOX[key]
    while True:
        ctx.checkpoint()
        order = box.pop(0) if box else None
        if order == "return":
            return int(ctx.attempt)
        if order == "raise":
            raise RuntimeError("scripted failure")
        time.sleep(0.002)


class RunModel(RuleBasedStateMachine):
    runs = Bundle("runs")

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.all_runs: list[TaskRun] = []
        self.frozen: dict[str, int] = {}  # terminal runs: version at which they ended

    @rule(
        target=runs,
        flavour=st.sampled_from(["coroutine", "thread"]),
        attempts=st.integers(1, 3),
        per_attempt=st.sampled_from([None, 0.05, 5.0]),
    )
    def submit(self, flavour: str, attempts: int, per_attempt: float | None) -> TaskRun:
        key = f"k{next(_ids)}"
        MAILBOX[key] = []
        fn = scripted if flavour == "coroutine" else scripted_thread
        timeout = Timeout(per_attempt=per_attempt) if per_attempt else None
        retry = RetryPolicy(
            max_attempts=attempts, backoff=ExponentialBackoff(base=0.005, max_delay=0.01)
        )

        async def start() -> TaskRun:
            run = TaskRun(fn, (key,), task_id=key, retry=retry, timeout=timeout, windows=WINDOWS)
            await run.__aenter__()
            return run

        run = self.runner.run(start())
        self.all_runs.append(run)
        return run

    @rule(run=runs)
    def pause(self, run: TaskRun) -> None:
        result = self.runner.run(run.pause())
        if result:
            assert run.status.value in {"paused", "stopping"} or run.status.is_terminal

    @rule(run=runs)
    def resume(self, run: TaskRun) -> None:
        self.runner.run(run.resume())

    @rule(run=runs, reason=st.sampled_from([None, "operator", "发布窗口"]))
    def stop(self, run: TaskRun, reason: str | None) -> None:
        self.runner.run(run.stop(reason=reason))

    @rule(run=runs, order=st.sampled_from(["return", "raise", "raise"]))
    def order(self, run: TaskRun, order: str) -> None:
        box = MAILBOX[run.task_id]
        box.append(order)

        async def settle() -> None:
            # Let the task read its order (unless it is paused or already over).
            deadline = time.monotonic() + 0.2
            while box and time.monotonic() < deadline:
                if run.done or run.status.value in {"paused", "pausing"}:
                    return
                await asyncio.sleep(0.002)

        self.runner.run(settle())

    @rule(seconds=st.sampled_from([0.0, 0.005, 0.03, 0.08]))
    def time_passes(self, seconds: float) -> None:
        self.runner.run(asyncio.sleep(seconds))

    @invariant()
    def records_are_sound(self) -> None:
        for run in self.all_runs:
            history = run.transitions
            for expected_version, record in enumerate(history, start=1):
                assert record.version == expected_version
                assert record.to_status in TRANSITIONS[record.from_status]
            assert run.status_version == len(history)
            assert audit_history(run.snapshot, history) == []
            if run.task_id in self.frozen:
                assert run.status_version == self.frozen[run.task_id]
            elif run.status.is_terminal:
                self.frozen[run.task_id] = run.status_version
                assert run.outcome is not None
                assert run.outcome.status is run.status

    def teardown(self) -> None:
        async def finish() -> None:
            for run in self.all_runs:
                MAILBOX[run.task_id].append("return")
                await run.__aexit__(None, None, None)

        try:
            self.runner.run(finish())
            for run in self.all_runs:
                assert run.done, run
                assert audit_history(run.snapshot, run.transitions) == []
        finally:
            self.runner.close()
            for run in self.all_runs:
                MAILBOX.pop(run.task_id, None)


RunModel.TestCase.settings = settings(
    max_examples=examples(40),
    stateful_step_count=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRunModel = RunModel.TestCase
