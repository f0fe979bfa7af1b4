"""Property: unchanged code always replays, whatever order steps finished in, whatever was
inserted earlier.

A random program of steps (sequential, and flows of steps gathered at once)
runs as attempt 1; attempts 2 to 4 run it again, or run a version with new
steps inserted anywhere. Each step body yields to the loop a random number
of times, drawn anew per attempt, so steps finish in another order each
time. Every attempt must replay what was recorded (no ``NondeterminismError``)
and every step body must run exactly once over all attempts. A swap of two
recorded sequential steps must be caught. On the in-memory store, through
the journal itself (the SQL stores keep the same record: the contract).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from chongming.errors import NondeterminismError
from chongming.plane.durable import Journal
from chongming.state.status import TaskStatus
from chongming.stores.memory import InMemoryTaskStore
from chongming.testing.store_contract._support import make_snapshot, next_step

#: A program: blocks run in order; a block is one step name, or flows gathered at once.
Block = str | list[list[str]]
Program = list[Block]

_names = iter(range(10**9))


def _name() -> str:
    return f"s{next(_names)}"


@st.composite
def programs(draw: st.DrawFn) -> Program:
    program: Program = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            program.append(_name())
        else:
            flows = draw(st.integers(1, 3))
            program.append(
                [[_name() for _ in range(draw(st.integers(1, 3)))] for _ in range(flows)]
            )
    return program


def _insert(program: Program, rnd: random.Random, count: int) -> Program:
    """``program`` with ``count`` new steps inserted at random places (in flows too)."""
    changed: Program = [
        block if isinstance(block, str) else [list(f) for f in block] for block in program
    ]
    for _ in range(count):
        at = rnd.randrange(len(changed) + 1)
        block = changed[at] if at < len(changed) else None
        if isinstance(block, list) and rnd.random() < 0.5:
            flow: list[str] = block[rnd.randrange(len(block))]
            flow.insert(rnd.randrange(len(flow) + 1), _name())
        else:
            changed.insert(at, _name())
    return changed


async def _run(journal: Journal, program: Program, rnd: random.Random, ran: Counter[str]) -> None:
    async def body(name: str, yields: int) -> str:
        ran[name] += 1
        for _ in range(yields):
            await asyncio.sleep(0)
        return name

    async def step(name: str) -> None:
        assert await journal.step(name, body, (name, rnd.randrange(6)), {}) == name

    async def flow(names: list[str]) -> None:
        for name in names:
            await step(name)

    for block in program:
        if isinstance(block, str):
            await step(block)
        else:
            await asyncio.gather(*(flow(names) for names in block))


async def _attempts(programs_by_attempt: list[Program], seed: int) -> Counter[str]:
    store = InMemoryTaskStore()
    snapshot = make_snapshot("t")
    await store.create(snapshot)
    for to in (TaskStatus.QUEUED, TaskStatus.STARTING, TaskStatus.RUNNING):
        moved, transition = next_step(snapshot, to, owner="n")
        await store.save(moved, expect_version=snapshot.status_version, transitions=[transition])
        snapshot = moved
    rnd, ran = random.Random(seed), Counter[str]()
    for program in programs_by_attempt:
        epoch = await store.begin_durable_attempt("t", "n", max_resumes=3)
        journal = Journal(store, "t", epoch, await store.steps("t"))
        await _run(journal, program, rnd, ran)
    return ran


def _names_of(program: Program) -> list[str]:
    return [n for b in program for n in ([b] if isinstance(b, str) else [x for f in b for x in f])]


@settings(deadline=None)
@given(programs(), st.integers(0, 2**32), st.integers(0, 3))
def test_unchanged_code_replays_whatever_the_finishing_order_and_insertions(
    program: Program, seed: int, inserted: int
) -> None:
    rnd = random.Random(seed)
    changed = _insert(program, rnd, inserted)
    # attempt 1: the old code; 2 to 4: the new one (unchanged after its first attempt)
    ran = asyncio.run(_attempts([program, changed, changed, changed], seed))
    assert ran == Counter(_names_of(changed))  # every body once, over all four attempts


@settings(deadline=None)
@given(programs(), st.integers(0, 2**32))
def test_a_swap_of_two_recorded_steps_one_after_the_other_is_caught(
    program: Program, seed: int
) -> None:
    swapped: Program = [_name(), _name(), *program]
    swapped[0], swapped[1] = swapped[1], swapped[0]
    raised = False

    async def both() -> None:
        nonlocal raised
        try:
            await _attempts([[swapped[1], swapped[0], *program], swapped], seed)
        except NondeterminismError:
            raised = True

    asyncio.run(both())
    assert raised
