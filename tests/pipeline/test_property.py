"""Random DAGs against a small reference model of the pipeline rules.

Hypothesis draws a graph (up to eight nodes, each depending on any earlier
ones, added in a random order so ids may name nodes not added yet), a join
mode and an ending per node (succeed, fail, or stopped by hand), an
aggregation policy, a concurrency limit, and maybe a moment at which the
whole pipeline is stopped. A real controller runs it; every node parks in
its function until the test lets it end, one at a time — always the
lowest-numbered running node — so the run is reproducible.

The model knows only the rules: a node is blocked until its join holds
(then ready), skipped once its join cannot hold; a fail-fast failure cancels
every node that has not started; a stop cancels those and stops the started
ones; the outcome follows from the first failure and any stop. Which ready
nodes the admission queue has started is the queue's business (tested
elsewhere), so the model is told that, and works out everything else.

Checked at every quiet moment and at the end: each node's status is the
model's; no node entered its function before its join held (judged on the
real upstream statuses it saw) and it was handed exactly the results of its
succeeded upstreams; no blocked node holds a slot or sits in the queue; the
slot count is exact and within the limit; the outcome is the model's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chongming import Controller, TaskStatus
from chongming.pipeline import AggregationPolicy, JoinMode, Pipeline, PipelineStatus
from chongming.policies import ControlWindows
from tests.pipeline.support import node_of, wait_until
from tests.tiers import examples

S = TaskStatus
TERMINAL = {s.value for s in TaskStatus if s.is_terminal}
CARRIERS = {S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED, S.STOPPING}
WINDOWS = ControlWindows(stop_grace=2.0, cancel_window=0.5, pause_window=0.5)


@dataclasses.dataclass(frozen=True)
class Scenario:
    upstreams: tuple[tuple[int, ...], ...]
    joins: tuple[JoinMode, ...]
    endings: tuple[str, ...]  # succeed / fail / stop
    aggregation: AggregationPolicy
    max_parallel: int
    stop_after: int | None  # stop the pipeline after this many releases
    order: tuple[int, ...]  # the order the nodes are added


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    count = draw(st.integers(1, 8))
    upstreams = tuple(
        tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)))) if i else ()
        for i in range(count)
    )
    return Scenario(
        upstreams=upstreams,
        joins=tuple(draw(st.sampled_from(JoinMode)) for _ in range(count)),
        endings=tuple(
            draw(st.sampled_from(["succeed", "succeed", "fail", "stop"])) for _ in range(count)
        ),
        aggregation=draw(st.sampled_from(AggregationPolicy)),
        max_parallel=draw(st.sampled_from([1, 2, 16])),
        stop_after=draw(st.none() | st.integers(0, count)),
        order=tuple(draw(st.permutations(range(count)))),
    )


def join_holds(join: JoinMode, ups: list[str]) -> bool | None:
    """True: may run; False: never can; None: not decided. ``ups``: upstream statuses."""
    if not ups:
        return True
    ended = [s for s in ups if s in TERMINAL]
    won = [s for s in ended if s == "succeeded"]
    if join is JoinMode.ALL_SUCCEEDED:
        if len(won) == len(ups):
            return True
        return False if len(won) < len(ended) else None
    if join is JoinMode.ALL_SETTLED:
        return True if len(ended) == len(ups) else None
    if won:
        return True
    return False if len(ended) == len(ups) else None


class Model:
    """The rules, on statuses: ``blocked``, ``ready`` (queued or started) or an ending."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.state = ["blocked"] * len(scenario.upstreams)
        self.halted = False
        self.stopped = False
        self.first_failure: int | None = None
        self.settle()

    def ups(self, index: int) -> list[str]:
        return [self.state[u] for u in self.scenario.upstreams[index]]

    def settle(self) -> None:
        changed = True
        while changed:
            changed = False
            for index, state in enumerate(self.state):
                if state != "blocked":
                    continue
                verdict = join_holds(self.scenario.joins[index], self.ups(index))
                if verdict is False:
                    self.state[index] = "skipped"
                    changed = True
                elif verdict is True and not self.halted:
                    self.state[index] = "ready"
                    changed = True

    def call_off(self, started: set[int]) -> None:
        for index, state in enumerate(self.state):
            if state == "blocked" or (state == "ready" and index not in started):
                self.state[index] = "cancelled"

    def end(self, index: int, started: set[int]) -> None:
        assert self.state[index] == "ready", (index, self.state)
        ending = self.scenario.endings[index]
        if self.stopped:
            ending = "stop"
        self.state[index] = {"succeed": "succeeded", "fail": "failed", "stop": "stopped"}[ending]
        if ending == "fail" and self.first_failure is None:
            self.first_failure = index
            if self.scenario.aggregation is AggregationPolicy.FAIL_FAST and not self.halted:
                self.halted = True
                self.settle()  # what can never run is skipped first ...
                self.call_off(started - {index})  # ... the rest that has not started is cancelled
                return
        self.settle()

    def stop(self, started: set[int]) -> None:
        self.stopped = self.halted = True
        self.call_off(started)

    def outcome(self) -> PipelineStatus:
        if self.first_failure is not None:
            return PipelineStatus.FAILED
        if self.stopped or any(s in ("stopped", "cancelled") for s in self.state):
            return PipelineStatus.CANCELLED
        return PipelineStatus.SUCCEEDED


async def play(scenario: Scenario) -> None:
    count = len(scenario.upstreams)
    events = [asyncio.Event() for _ in range(count)]
    entered: set[int] = set()
    problems: list[str] = []
    controller = Controller(max_parallel=scenario.max_parallel, windows=WINDOWS)

    async def node(ctx: Any, ending: str) -> str:
        index = int(node_of(ctx.task_id)[1:])
        entered.add(index)
        ups = scenario.upstreams[index]
        seen = [controller.run_for(f"p:n{u}").status.value for u in ups]
        if join_holds(scenario.joins[index], seen) is not True:
            problems.append(f"n{index} entered with upstreams {seen}")
        succeeded = {f"n{u}": f"n{u}" for u, s in zip(ups, seen, strict=True) if s == "succeeded"}
        given = dict(ctx.upstream)
        # The results are those of the upstreams that had succeeded when the node was
        # released: all of them for the ALL_* joins (every upstream had ended), at least
        # one for ANY_SUCCEEDED (another may succeed while it waits for a slot).
        exact = scenario.joins[index] is not JoinMode.ANY_SUCCEEDED or not ups
        if (given != succeeded) if exact else not (given and given.items() <= succeeded.items()):
            problems.append(f"n{index} got {given}, expected {succeeded}")
        await events[index].wait()
        await ctx.checkpoint()
        if ending == "fail":
            raise RuntimeError("failed on purpose")
        return f"n{index}"

    async with controller:
        controller.register("node", node)
        pipeline = Pipeline("random", aggregation=scenario.aggregation)
        for index in scenario.order:
            pipeline.node(
                "node",
                scenario.endings[index],
                node_id=f"n{index}",
                depends_on=[f"n{u}" for u in scenario.upstreams[index]],
                join=scenario.joins[index],
            )
        run = await controller.submit_pipeline(pipeline, run_id="p")
        runs = [run.node(f"n{index}") for index in range(count)]
        model = Model(scenario)

        def quiet() -> bool:
            return all(
                r.status is not S.STARTING and (r.status not in CARRIERS or index in entered)
                for index, r in enumerate(runs)
            )

        async def check() -> set[int]:
            await wait_until(quiet, 10)
            assert problems == [], problems
            started = {i for i, r in enumerate(runs) if r.status in CARRIERS}
            for index, r in enumerate(runs):
                expected = model.state[index]
                actual = r.status.value
                if expected == "ready":
                    assert actual in ("queued", "running", "stopping"), (index, actual, model.state)
                else:
                    assert actual == expected, (index, actual, model.state)
                if r.status is S.BLOCKED:
                    assert not r.holds_slot
            stats = await controller.stats()
            assert stats.holding_slot == len(started) <= scenario.max_parallel
            assert stats.queued == sum(r.status is S.QUEUED for r in runs)
            return started

        releases = 0
        while not run.done:
            started = await check()
            if scenario.stop_after == releases and not model.stopped:
                model.stop(started)
                assert await run.stop("random stop")
                continue
            index = min(started)
            if scenario.endings[index] == "stop" and not model.stopped:
                assert await controller.stop(f"p:n{index}")
            model.end(index, started)
            events[index].set()
            await wait_until(lambda index=index: runs[index].done, 10)
            releases += 1
        await check()
        outcome = await run.wait(5)
        assert outcome.status is model.outcome(), (outcome.status, model.state)
        assert outcome.first_failure == (
            None if model.first_failure is None else f"n{model.first_failure}"
        )
    assert len(controller._pipelines) == 0


@settings(
    max_examples=examples(150),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenarios())
def test_random_pipelines_follow_the_rules(scenario: Scenario) -> None:
    asyncio.run(play(scenario), debug=True)
