"""Records of durable execution: the epoch that fences attempts, and memoised steps.

A durable task has a *run row* from its first attempt on. Every attempt
starts by raising the run's **epoch** (``begin_durable_attempt``: allowed
only while the task is starting or running under the caller as owner), and
every write the attempt makes for the task (a step result) is accepted only
while the epoch is still its own and the task still holds a carrier. So an
attempt whose worker was judged dead, and that runs on anyway (a frozen
process that thawed), cannot write over the attempt that replaced it.

A *step* is memoised under ``(task, name, occurrence)``: written once, in
the order given by ``seq`` (the order steps *finished* in), with its JSON
result or the error it raised, and ``after``: the step its flow of code
called just before it (the order steps were *called* in), which replay
checks instead of ``seq``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from chongming.errors import PayloadError, StoreError
from chongming.state.durable_names import MAX_NAME, MAX_RESUMES, check_name
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, json_form
from chongming.stores.checks import check_text

__all__ = [
    "FIRST_CALL",
    "MAX_NAME",
    "MAX_RESUMES",
    "MAX_STEP_NAME",
    "Commit",
    "CommitFailed",
    "DurableRun",
    "EffectState",
    "Fact",
    "StaleEpoch",
    "StepKey",
    "StepRecord",
    "check_begin",
    "check_effect",
    "check_enqueue_facts",
    "check_fact",
    "check_name",
    "check_step",
    "same_fact_value",
]

#: Longest recorded step name: room for the runtime's own prefixes
#: (``sleep:<name>``, ``fact:<name>:deadline``) around a name of :data:`MAX_NAME`.
MAX_STEP_NAME = MAX_NAME + 20
#: A step as replay finds it: ``(name, occurrence)``.
StepKey = tuple[str, int]
#: ``StepRecord.after`` of a step its flow called before any other.
FIRST_CALL: StepKey = ("", 0)


class StaleEpoch(StoreError):
    """A write of an attempt that no longer holds its task (another attempt replaced it).

    Stores raise it; the task context turns it into
    :class:`~chongming.errors.FencingError` for the attempt's code.
    """

    def __init__(self, task_id: str, epoch: int, why: str) -> None:
        self.task_id = task_id
        self.epoch = epoch
        super().__init__(f"attempt epoch {epoch} of task {task_id!r} is fenced off: {why}")


class CommitFailed(StoreError):
    """The caller's ``commit`` raised: nothing of the operation was written.

    The store's way to carry the caller's own error out of its transaction;
    the task context raises the original (``__cause__``) to the task.
    """

    def __init__(self, op_key: str, error: BaseException) -> None:
        self.op_key = op_key
        super().__init__(
            f"the commit of operation {op_key!r} raised {type(error).__name__}: {error}"
        )
        self.__cause__ = error


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DurableRun:
    """A durable task's run row: the epoch now, and the resume bound it was started with."""

    task_id: str
    epoch: int
    max_resumes: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One memoised step. ``ok``: ``value`` is the result; else ``{"type", "message"}``.

    ``after``: the key of the step the same flow of the task's code called
    just before this one (:data:`FIRST_CALL` if none), so a replay can check
    the order steps were called in, whatever order they finished in. ``None``
    in a step recorded before chongming kept it (schema 0009): not checked.
    """

    name: str
    occurrence: int
    ok: bool
    value: Any
    seq: int = 0  # given by the store when it records the step
    epoch: int = 0
    after: StepKey | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """A set-once value sent to a task by name; ``key`` says who sent it (optional)."""

    task_id: str
    name: str
    payload: Any
    key: str | None = None


def same_fact_value(stored: Any, sent: Any) -> bool:
    """Whether two fact payloads (JSON forms) are the same JSON value, types included.

    Python's ``==`` says ``True == 1`` and ``False == 0.0``; JSON's ``true``
    and ``1`` are different values, so a boolean equals only a boolean. Numbers
    compare by value (JSON has one number type, and PostgreSQL's ``jsonb``
    may give ``1e20`` back as an integer); objects by keys, arrays in order.
    """
    if isinstance(stored, bool) or isinstance(sent, bool):
        return isinstance(stored, bool) and isinstance(sent, bool) and stored is sent
    if isinstance(stored, int | float) and isinstance(sent, int | float):
        return stored == sent
    if isinstance(stored, dict) and isinstance(sent, dict):
        return stored.keys() == sent.keys() and all(
            same_fact_value(stored[key], sent[key]) for key in stored
        )
    if isinstance(stored, list | tuple) and isinstance(sent, list | tuple):
        return len(stored) == len(sent) and all(map(same_fact_value, stored, sent))
    return type(stored) is type(sent) and bool(stored == sent)


#: The caller's commit of an operation's result: ``commit(connection, result)``, run
#: in the store's transaction (SQLite: a ``sqlite3.Connection`` on the writer's
#: thread, so a plain function; PostgreSQL: an asyncpg connection, a coroutine function).
Commit = Callable[[Any, Any], Any]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EffectState:
    """An operation's ledger row when an attempt begins it.

    ``done``: it has a result (returned, nothing runs again). Otherwise the
    intent is written now; ``resumed`` says an earlier attempt wrote it and
    left no result, so the operation may have reached the outside world.
    """

    done: bool
    resumed: bool
    result: Any = None


def check_effect(task_id: object, epoch: object, op_key: object) -> None:
    """The arguments of ``begin_effect`` / ``finish_effect``, refused alike by every backend."""
    _check_id(task_id, "task_id")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise PayloadError("epoch", f"must be an integer >= 1, got {epoch!r}")
    _check_name(op_key, "operation key", longest=1000)


def check_fact(fact: object, limit: int | None) -> Fact:
    """A fact as every backend stores it: checked names, the payload in its JSON form."""
    if not isinstance(fact, Fact):
        raise PayloadError("fact", f"must be a Fact, got {type(fact).__name__}")
    _check_id(fact.task_id, "task_id")
    _check_name(fact.name, "fact name")
    if fact.key is not None:
        _check_name(fact.key, "fact key", longest=1000)
    payload = json_form(fact.payload, f"fact {fact.name!r}", limit or DEFAULT_MAX_PAYLOAD_BYTES)
    return dataclasses.replace(fact, payload=payload)


def check_enqueue_facts(facts: object, task_id: str, limit: int | None) -> tuple[Fact, ...]:
    """The facts an ``enqueue`` writes with its task: each checked, for that task, once."""
    if not isinstance(facts, tuple | list):
        raise PayloadError("facts", f"must be a sequence of Fact, got {type(facts).__name__}")
    checked = tuple(check_fact(fact, limit) for fact in facts)
    names = set()
    for fact in checked:
        if fact.task_id != task_id:
            raise PayloadError(
                "facts", f"fact {fact.name!r} is for {fact.task_id!r}, not {task_id!r}"
            )
        if fact.name in names:
            raise PayloadError("facts", f"fact {fact.name!r} is given twice")
        names.add(fact.name)
    return checked


def _check_id(value: object, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise PayloadError(what, "must be a non-empty string")
    check_text(value, what)


def _check_name(value: object, what: str, *, longest: int = MAX_NAME) -> None:
    check_name(value, what, longest=longest)


def check_begin(task_id: object, owner: object, max_resumes: object) -> None:
    """The arguments of ``begin_durable_attempt``, refused alike by every backend."""
    for what, text in (("task_id", task_id), ("owner", owner)):
        if not isinstance(text, str) or not text:
            raise PayloadError(what, "must be a non-empty string")
        check_text(text, what)
    if (
        isinstance(max_resumes, bool)
        or not isinstance(max_resumes, int)
        or not 0 <= max_resumes <= MAX_RESUMES
    ):
        raise PayloadError(
            "max_resumes", f"must be an integer from 0 to 2**31 - 1, got {max_resumes!r}"
        )


def check_step(task_id: object, epoch: object, step: object, limit: int | None) -> StepRecord:
    """A step as every backend stores it: checked names, the value in its JSON form."""
    if not isinstance(task_id, str) or not task_id:
        raise PayloadError("task_id", "must be a non-empty string")
    check_text(task_id, "task_id")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise PayloadError("epoch", f"must be an integer >= 1, got {epoch!r}")
    if not isinstance(step, StepRecord):
        raise PayloadError("step", f"must be a StepRecord, got {type(step).__name__}")
    name = step.name
    _check_name(name, "step name", longest=MAX_STEP_NAME)
    _check_occurrence(step.occurrence, "step occurrence")
    after = _checked_after(step.after)
    value = json_form(
        step.value, f"the result of step {name!r}", limit or DEFAULT_MAX_PAYLOAD_BYTES
    )
    return dataclasses.replace(step, value=value, epoch=epoch, ok=bool(step.ok), after=after)


def _check_occurrence(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RESUMES:
        raise PayloadError(what, f"must be an integer from 0 to 2**31 - 1, got {value!r}")


def _checked_after(after: object) -> StepKey | None:
    """``None``, :data:`FIRST_CALL`, or the key of a step (a pair, a list of two too)."""
    if after is None:
        return None
    if not isinstance(after, tuple | list) or len(after) != 2:
        raise PayloadError("step after", f"must be a (name, occurrence) pair, got {after!r}")
    name, occurrence = after
    key = (name, occurrence)
    if key == FIRST_CALL and isinstance(occurrence, int) and not isinstance(occurrence, bool):
        return FIRST_CALL
    _check_name(name, "step after", longest=MAX_STEP_NAME)
    _check_occurrence(occurrence, "step after occurrence")
    return key
