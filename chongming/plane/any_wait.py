"""Waiting for whichever of several facts comes first (``ctx.as_completed``), decided once.

A wait for one fact records two steps: ``fact:<name>:deadline``, then the
decision ``fact:<name>``. The store wakes a parked task when a fact comes for
which the task recorded more deadline steps than decisions (put_fact, a
child's end, and a park that finds its fact already there all use that
rule). A wait for several facts keeps that balance, so the same rule wakes
the task when any of them comes:

- each member gets its deadline step once, when it is first waited for
  (no deadline: children only end);
- each answer is one ``children:any`` step listing the members found ended,
  in the order the rest of the code will see them, then each one's decision
  ``fact:<name>``, as a single fact wait writes it.

A replay reads the lists back, so the code sees the same ends in the same
groups, whatever has ended since. The records of one answer are written in
one store call (``record_steps``), and so are the deadline steps of the
members first waited for together: the same records as one by one, fewer
round trips. A member the task stopped waiting for (a loop over
``ctx.as_completed`` left early) keeps its deadline step open; once its fact
is in the store, every park of the task would be woken at once by it. So
while such a fact is there the task does not park: it waits in its slot
(:meth:`AnyWaits.may_park`). ``ctx.gather`` of such a child closes it.

``ctx.gather`` waits for its children one after another, two records each;
:func:`decided_in_order` writes the pairs of the leading children that have
already ended in one call: again the same records in the same order.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol

from chongming.clock import SYSTEM_CLOCK
from chongming.plane.outages import through_outages
from chongming.stores.base import TaskStore
from chongming.stores.durable import StepKey, StepRecord
from chongming.task_api.journal import ParkRequest

__all__ = ["ANY_STEP", "AnyWaits", "decided_in_order", "wait_any"]

#: The step each answer of a wait for several facts is recorded under.
ANY_STEP = "children:any"
#: How often a wait that cannot park (not a worker's claim) looks again (seconds).
POLL = 0.05
#: A parked wait for several facts is claimed again after this long at most.
RECHECK = 3600.0


class AnyWaits:
    """The facts one attempt waits for together: open (deadline recorded) or decided."""

    __slots__ = ("decided", "open")

    def __init__(self) -> None:
        #: Members whose deadline step is recorded and whose decision is not.
        self.open: dict[str, None] = {}
        #: Members a wait for several decided: name -> the decision's record.
        self.decided: dict[str, StepRecord] = {}

    def take_open(self, name: str) -> bool:
        """True if ``name``'s deadline step is recorded already: a fact wait decides it now."""
        if name in self.open:
            del self.open[name]
            return True
        return False

    async def may_park(self, journal: AnyWaitJournal, waiting: Collection[str]) -> bool:
        """False while a member this wait does not cover is open and its fact is there."""
        dangling = [name for name in self.open if name not in waiting]
        if not dangling:
            return True
        present = await _present(journal)
        return not any(name in present for name in dangling)


class AnyWaitJournal(Protocol):
    """The journal methods a wait for several facts is built of (control/durable.py)."""

    task_id: str
    parkable: bool
    park_threshold: float
    any_waits: AnyWaits

    @property
    def store(self) -> TaskStore: ...

    def check_fenced(self) -> None: ...

    def call_of(self, name: str) -> tuple[StepKey, StepKey, StepRecord | None]: ...

    def peek(self, name: str) -> StepRecord | None: ...

    async def record_many(self, steps: Sequence[StepRecord]) -> list[StepRecord]: ...

    async def step(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...

    async def record(self, step: StepRecord) -> StepRecord: ...

    async def clock_offset(self) -> float: ...


async def wait_any(
    journal: AnyWaitJournal, names: Sequence[str], beat: Callable[[], Awaitable[None]]
) -> list[tuple[str, StepRecord]]:
    """The members of ``names`` that ended, at least one, each with its decision.

    Parks off the slot (on a worker's claim) until one of them comes;
    ``beat`` lets a stop or pause take effect between looks.
    """
    journal.check_fenced()
    waits = journal.any_waits
    deadlines = []
    for name in names:
        if name not in waits.open and name not in waits.decided:
            (_, occurrence), after, recorded = journal.call_of(f"fact:{name}:deadline")
            if recorded is None:  # no deadline: children only end
                deadlines.append(_deadline_step(name, occurrence, after))
            waits.open[name] = None
    if deadlines:
        await journal.record_many(deadlines)
    ready = [(name, waits.decided[name]) for name in names if name in waits.decided]
    if ready:
        return ready
    (_, occurrence), after, recorded = journal.call_of(ANY_STEP)
    found: dict[str, Any] = {}
    writes: list[StepRecord] = []
    if recorded is not None:
        ended = [str(name) for name in recorded.value]
    else:
        found = await _first_ended(journal, names, beat)
        ended = list(found)
        writes.append(
            StepRecord(name=ANY_STEP, occurrence=occurrence, ok=True, value=ended, after=after)
        )
    decisions: dict[str, StepRecord] = {}
    deciding: list[str] = []  # the names of the decisions in ``writes``, in order
    for name in ended:
        (_, occurrence), after, recorded = journal.call_of(f"fact:{name}")
        if recorded is not None:
            decisions[name] = recorded
        else:
            payload = await _payload(journal, name, found)
            writes.append(_decision_step(name, occurrence, after, payload))
            deciding.append(name)
    if writes:
        stored = await journal.record_many(writes)
        decisions.update(zip(deciding, stored[len(stored) - len(deciding) :], strict=True))
    answers = []
    for name in ended:
        waits.open.pop(name, None)
        waits.decided[name] = decisions[name]
        answers.append((name, decisions[name]))
    return answers


async def decided_in_order(journal: AnyWaitJournal, names: Sequence[str]) -> list[Any]:
    """The facts of the leading ``names`` that need no wait, in order: one write for all.

    Stops at the first name whose fact is not in the store yet, or that a
    wait for several facts holds open or decided (a single fact wait of its
    own settles that one). A replay answers from the records, reading nothing.
    """
    journal.check_fenced()
    waits = journal.any_waits
    answers: list[Any] = []
    writes: list[StepRecord] = []
    present: dict[str, Any] | None = None
    for name in names:
        key, deadline_key = f"fact:{name}", f"fact:{name}:deadline"
        if name in waits.decided or name in waits.open:
            break
        if journal.peek(deadline_key) is not None:  # recorded: replay the pair
            decision = journal.peek(key)
            if writes or decision is None or _fact_of(decision) is None:
                break  # a wait of its own goes on from its deadline (or answers a timeout)
            journal.call_of(deadline_key)
            journal.call_of(key)
            answers.append(_fact_of(decision))
            continue
        if journal.peek(key) is not None:
            break  # a decision without its deadline: a wait of its own says what is wrong
        if present is None:
            present = await _present(journal)
        if name not in present:
            break
        (_, occurrence), after, _ = journal.call_of(deadline_key)
        writes.append(_deadline_step(name, occurrence, after))
        (_, occurrence), after, _ = journal.call_of(key)
        writes.append(_decision_step(name, occurrence, after, present[name]))
    if writes:
        stored = await journal.record_many(writes)
        answers.extend(_fact_of(step) for step in stored[1::2])  # each pair's decision
    return answers


def _fact_of(decision: StepRecord) -> Any:
    value = decision.value if isinstance(decision.value, dict) else {}
    return value.get("fact")


def _deadline_step(name: str, occurrence: int, after: StepKey) -> StepRecord:
    """The deadline record of a wait without one (``fact:<name>:deadline``, value None)."""
    key = f"fact:{name}:deadline"
    return StepRecord(name=key, occurrence=occurrence, ok=True, value=None, after=after)


def _decision_step(name: str, occurrence: int, after: StepKey, payload: Any) -> StepRecord:
    return StepRecord(
        name=f"fact:{name}", occurrence=occurrence, ok=True, value={"fact": payload}, after=after
    )


async def _first_ended(
    journal: AnyWaitJournal, names: Sequence[str], beat: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    """Look until a member's fact is in the store; park between looks when the task may."""
    waits = journal.any_waits
    while True:
        present = await _present(journal)
        found = {name: present[name] for name in names if name in present}
        if found:
            return found
        await beat()  # stop and pause take effect here
        if journal.parkable and journal.park_threshold != math.inf:
            dangling = [name for name in waits.open if name not in names]
            if not any(name in present for name in dangling):
                now = SYSTEM_CLOCK.time() + await journal.clock_offset()
                more = f" (or {len(names) - 1} more)" if len(names) > 1 else ""
                raise ParkRequest(now + RECHECK, fact=f"{names[0]}{more}")
        await asyncio.sleep(POLL)


async def _payload(journal: AnyWaitJournal, name: str, found: dict[str, Any]) -> Any:
    """The fact ``name`` an answer listed: as found, or read again."""
    if name in found:
        return found[name]
    # The answer was recorded, the decision was not (the attempt ended between).
    fact = await through_outages(lambda: journal.store.get_fact(journal.task_id, name))
    if fact is None:
        raise LookupError(f"task {journal.task_id!r}: the fact {name!r} it saw is gone")
    return fact.payload


async def _present(journal: AnyWaitJournal) -> dict[str, Any]:
    facts = await through_outages(lambda: journal.store.facts(journal.task_id))
    return {fact.name: fact.payload for fact in facts}


def _no_deadline() -> None:
    return None
