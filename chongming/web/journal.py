"""A durable task's journal as one timeline: its runs, steps, waits and parks, in order.

The store keeps the journal apart from the history: steps (name, occurrence,
the epoch of the attempt that recorded them, their result or error), facts
(name, payload, who sent them) and the run row (the epoch now). The port
gives no step a time of its own, so a step is placed by its epoch: epoch *k*
is the *k*-th ``starting → running`` of the history, and the step is shown
inside that run, between the run's start and its end, in the order the
store recorded it. Sleeps and fact waits are steps too (``sleep:<name>``
holds the wake-up time, ``fact:<name>:deadline`` the deadline,
``fact:<name>`` the outcome); parks, hand-backs and resumes are transitions.

Pure: :func:`build_journal` takes what :func:`read_journal` read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chongming.clock import to_datetime
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.durable import Fact, StepRecord
from chongming.stores.journal import EffectEntry, JournalDetails

if TYPE_CHECKING:
    from chongming.stores.base import TaskStore

__all__ = [
    "MAX_ENTRIES",
    "NO_JOURNAL",
    "PREVIEW_CHARS",
    "Journal",
    "JournalEntry",
    "JournalRun",
    "build_journal",
    "preview",
    "read_journal",
]

#: The longest preview of a step's result or error, a fact's payload (characters).
PREVIEW_CHARS = 240
#: The most steps one page shows; the rest are counted, not listed.
MAX_ENTRIES = 500

_ENDINGS = {
    Trigger.SLEEPING: "parked (a long sleep or fact wait gave its slot back)",
    Trigger.PARKED: "parked",
    Trigger.HANDED_BACK: "handed back by a closing worker",
    Trigger.LEASE_EXPIRED: "lost: its worker's lease expired",
    Trigger.RESUMED: "lost, then resumed",
    Trigger.SHUTDOWN: "ended by a shutdown",
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JournalRun:
    """One run of the task's code: an epoch, from its ``→ running`` to where it stopped holding."""

    epoch: int
    attempt: int
    started_at: datetime
    ended_at: datetime | None  # None: still running
    ending: str  # how it ended, in words ("succeeded", "parked", "lost: …")
    lost: bool  # its worker died under it: what it did after its last step is gone


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JournalEntry:
    """One line of the timeline.

    ``kind``: ``transition``, ``run``, ``step``, ``sleep``, ``fact-wait``,
    ``fact-decided``. ``at`` is a stored time (transitions and runs);
    steps carry ``epoch`` and ``seq`` instead (the port stores no step time).
    """

    kind: str
    title: str
    detail: str = ""
    at: datetime | None = None
    epoch: int | None = None
    seq: int | None = None
    ok: bool = True
    preview: str = ""
    transition: Transition | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Journal:
    """What the page shows; ``durable`` False: the task has no run row (no journal)."""

    durable: bool
    epoch: int = 0
    entries: Sequence[JournalEntry] = ()
    runs: Sequence[JournalRun] = ()
    facts: Sequence[Fact] = ()
    fact_times: Mapping[str, datetime] = dataclasses.field(default_factory=dict)
    effects: int = 0
    steps: int = 0
    hidden_steps: int = 0  # steps past MAX_ENTRIES, not listed


#: The journal of a task that has none (not durable, or not started yet).
NO_JOURNAL = Journal(durable=False)


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """``value`` as compact JSON, cut to ``limit`` characters (escaped later, by the page)."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        return text[:limit] + f"… ({len(text):,} characters)"
    return text


def _runs(history: Sequence[Transition]) -> list[JournalRun]:
    runs: list[JournalRun] = []
    start: Transition | None = None
    for transition in history:
        if transition.from_status is TaskStatus.STARTING and transition.to_status is (
            TaskStatus.RUNNING
        ):
            start = transition
            continue
        if start is None or transition.to_status.holds_carrier:
            continue
        ending = _ENDINGS.get(transition.trigger, transition.to_status.value)
        lost = transition.to_status is TaskStatus.LOST or transition.trigger in (
            Trigger.LEASE_EXPIRED,
            Trigger.RESUMED,
        )
        runs.append(_run(len(runs) + 1, start, transition.at, ending, lost))
        start = None
    if start is not None:
        runs.append(_run(len(runs) + 1, start, None, "running", False))
    return runs


def _run(
    epoch: int, start: Transition, ended: datetime | None, ending: str, lost: bool
) -> JournalRun:
    return JournalRun(
        epoch=epoch,
        attempt=start.attempt,
        started_at=start.at,
        ended_at=ended,
        ending=ending,
        lost=lost,
    )


def _moment(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return to_datetime(float(value))
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _step_entry(step: StepRecord) -> JournalEntry:
    label = f"{step.name} #{step.occurrence}" if step.occurrence else step.name
    if step.name.startswith("sleep:"):
        wake = _moment(step.value)
        title = f"sleep {step.name[len('sleep:') :]!r}"
        detail = f"wakes at {wake.isoformat()}" if wake else "wake-up time not recorded"
        return JournalEntry(
            kind="sleep", title=title, detail=detail, at=None, epoch=step.epoch, seq=step.seq
        )
    if step.name.startswith("fact:") and step.name.endswith(":deadline"):
        fact = step.name[len("fact:") : -len(":deadline")]
        deadline = _moment(step.value)
        detail = f"deadline {deadline.isoformat()}" if deadline else "no deadline"
        return JournalEntry(
            kind="fact-wait",
            title=f"waits for fact {fact!r}",
            detail=detail,
            epoch=step.epoch,
            seq=step.seq,
        )
    if step.name.startswith("fact:"):
        fact = step.name[len("fact:") :]
        outcome = step.value if isinstance(step.value, dict) else {}
        if "fact" in outcome:
            return JournalEntry(
                kind="fact-decided",
                title=f"fact {fact!r} received",
                preview=preview(outcome["fact"]),
                epoch=step.epoch,
                seq=step.seq,
            )
        return JournalEntry(
            kind="fact-decided",
            title=f"fact {fact!r} timed out",
            ok=False,
            epoch=step.epoch,
            seq=step.seq,
        )
    if step.ok:
        return JournalEntry(
            kind="step",
            title=f"step {label}",
            preview=preview(step.value),
            epoch=step.epoch,
            seq=step.seq,
        )
    error = step.value if isinstance(step.value, dict) else {"message": step.value}
    shown = f"{error.get('type', 'error')}: {error.get('message', '')}"
    return JournalEntry(
        kind="step",
        title=f"step {label} raised",
        ok=False,
        preview=preview(shown),
        epoch=step.epoch,
        seq=step.seq,
    )


def _effect_entry(effect: EffectEntry) -> JournalEntry:
    times = []
    if effect.started_at is not None:
        times.append(f"intent {effect.started_at.isoformat()}")
    if effect.done_at is not None:
        times.append(f"committed {effect.done_at.isoformat()}")
        if effect.started_at is not None:
            times.append(f"{(effect.done_at - effect.started_at).total_seconds():.3f} s")
    if effect.committed:
        return JournalEntry(
            kind="effect",
            title=f"effect {effect.op_key!r} committed",
            detail=", ".join(times),
            at=effect.started_at,
            epoch=effect.epoch,
            preview=preview(effect.result),
        )
    return JournalEntry(
        kind="effect",
        title=f"effect {effect.op_key!r} begun, not committed",
        detail=", ".join([*times, "its attempt ended before the commit, or is still in it"]),
        at=effect.started_at,
        epoch=effect.epoch,
        ok=False,
    )


def _in_order(entries: list[JournalEntry]) -> list[JournalEntry]:
    """A run's entries by time when every one has a time, else as given (steps, effects)."""
    if entries and all(entry.at is not None for entry in entries):
        return sorted(entries, key=lambda entry: entry.at or datetime.min)
    return entries


def _with_sendings(
    entries: list[JournalEntry], facts: Sequence[Fact], times: Mapping[str, datetime]
) -> list[JournalEntry]:
    """Each fact's sending, before the first transition after it (where the store kept when)."""
    for fact in sorted(facts, key=lambda f: times.get(f.name) or datetime.max.replace(tzinfo=UTC)):
        sent = times.get(fact.name)
        if sent is None:
            continue
        by = f"by {fact.key}" if fact.key else "sender not given"
        entry = JournalEntry(
            kind="fact-sent",
            title=f"fact {fact.name!r} sent",
            detail=by,
            at=sent,
            preview=preview(fact.payload),
        )
        place = next(
            (
                index
                for index, other in enumerate(entries)
                if other.kind == "transition" and other.at is not None and other.at > sent
            ),
            len(entries),
        )
        entries.insert(place, entry)
    return entries


def build_journal(
    history: Sequence[Transition],
    steps: Sequence[StepRecord],
    facts: Sequence[Fact],
    epoch: int | None,
    details: JournalDetails | None = None,
) -> Journal:
    """The timeline: each transition, and after each run's start the steps of its epoch."""
    if epoch is None:
        return NO_JOURNAL
    details = details or JournalDetails()
    runs = _runs(history)
    shown = sorted(steps, key=lambda s: (s.epoch, s.seq))[:MAX_ENTRIES]
    by_epoch: dict[int, list[JournalEntry]] = {}
    for step in shown:
        entry = _step_entry(step)
        at = details.step_times.get((step.name, step.occurrence))
        by_epoch.setdefault(step.epoch, []).append(dataclasses.replace(entry, at=at))
    unplaced: list[JournalEntry] = []  # effects whose epoch the store does not keep
    for effect in details.effects[:MAX_ENTRIES]:
        entry = _effect_entry(effect)
        if effect.epoch is None:
            unplaced.append(entry)
        else:
            by_epoch.setdefault(effect.epoch, []).append(entry)
    entries: list[JournalEntry] = []
    placed: set[int] = set()
    runs_left = iter(runs)
    for transition in history:
        entries.append(
            JournalEntry(
                kind="transition",
                title=f"{transition.from_status.value} → {transition.to_status.value}",
                detail=transition.trigger,
                at=transition.at,
                transition=transition,
            )
        )
        started = (
            transition.from_status is TaskStatus.STARTING
            and transition.to_status is TaskStatus.RUNNING
        )
        if not started:
            continue
        run = next(runs_left, None)
        if run is None:
            continue
        entries.append(_run_entry(run))
        entries.extend(_in_order(by_epoch.get(run.epoch, [])))
        placed.add(run.epoch)
    for orphan in sorted(set(by_epoch) - placed):
        # An epoch the history shows no run for (e.g. its start was pruned): listed last.
        entries.append(
            JournalEntry(
                kind="run",
                title=f"epoch {orphan}",
                detail="no matching start in the history",
                epoch=orphan,
            )
        )
        entries.extend(_in_order(by_epoch[orphan]))
    if unplaced:
        entries.append(JournalEntry(kind="run", title="effects (no epoch kept)"))
        entries.extend(unplaced)
    entries = _with_sendings(entries, facts, details.fact_times)
    return Journal(
        durable=True,
        epoch=epoch,
        entries=entries,
        runs=runs,
        facts=facts,
        fact_times=dict(details.fact_times),
        effects=len(details.effects),
        steps=len(steps),
        hidden_steps=max(0, len(steps) - len(shown)),
    )


def _run_entry(run: JournalRun) -> JournalEntry:
    ended = "still running" if run.ended_at is None else f"until {run.ended_at.isoformat()}"
    seconds = (
        ""
        if run.ended_at is None
        else f" ({(run.ended_at - run.started_at).total_seconds():.3f} s)"
    )
    return JournalEntry(
        kind="run",
        title=f"run {run.epoch} (epoch {run.epoch}, attempt {run.attempt})",
        detail=f"{ended}{seconds}; {run.ending}",
        at=run.started_at,
        epoch=run.epoch,
        ok=not run.lost,
    )


async def read_journal(
    store: TaskStore | None, task_id: str, history: Sequence[Transition]
) -> Journal:
    """Read the task's run row, steps, facts and details (by task id) and build the timeline."""
    if store is None:
        return NO_JOURNAL
    try:
        runs = await store.durable_runs([task_id])
    except NotImplementedError:
        return NO_JOURNAL
    run = runs.get(task_id)
    if run is None:
        return NO_JOURNAL
    steps = await store.steps(task_id)
    facts = await store.facts(task_id)
    try:
        details = await store.journal_details(task_id)
    except NotImplementedError:
        details = JournalDetails()
    return build_journal(history, steps, facts, run.epoch, details)
