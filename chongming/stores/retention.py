"""Retention: which terminal tasks a prune may delete, as records and pure decisions.

A prune deletes a terminal task with every row that hangs off it (its
history, commands, idempotency key, durable run, steps, facts, effects and
trace carrier) once it has been finished longer than its period. The rules
(docs/retention.md):

- Only terminal tasks (``succeeded``, ``failed``, ``stopped``, ``cancelled``,
  ``skipped``, ``lost``) are ever deleted, judged by the stored status in the
  deleting statement itself, so a task that is anything else is kept whatever
  the caller asked. Age is ``finished_at`` (written when a task becomes
  terminal); a terminal row without one is never pruned.
- An idempotency key lives as long as its task, and no period may be
  shorter than the idempotency window (:data:`DEFAULT_IDEMPOTENCY_WINDOW`):
  a key therefore answers for at least that long after its task ended, which
  is what a late retry of an enqueue (the outbox relay's replay after a crash)
  relies on. A shorter period is :class:`RetentionTooShort`.
- Dependants: a child task names its parent (``parent_id``, ``ctx.child``),
  and every backend's selection adds :data:`DEPENDANTS_RULE`: a task with a
  child that is not terminal is kept. A finished child may go before its
  parent: its end is stored as the parent's fact, which is what the parent
  reads.

:class:`Retention` is the controller's setting (terminal, failed and by-name
periods); :func:`selections` turns it into :class:`PruneSelection` records,
one per rule, that a store's :meth:`~chongming.stores.ports.retention.RetentionStore.prune_tasks`
applies in bounded batches.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from chongming.errors import InvalidRetention, RetentionTooShort
from chongming.state.status import TERMINAL_STATUSES, TaskStatus

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_IDEMPOTENCY_WINDOW",
    "DEPENDANTS_RULE",
    "FAILED_STATUSES",
    "TASK_TABLES",
    "PruneSelection",
    "Retention",
    "check_batch",
    "check_selection",
    "format_age",
    "parse_age",
    "parse_statuses",
    "selections",
]

#: How long an idempotency key must still answer after its task ended.
DEFAULT_IDEMPOTENCY_WINDOW = timedelta(days=1)
#: Tasks one prune statement deletes (with their rows): short enough to hold no lock for long.
DEFAULT_BATCH = 1000
#: The largest batch: a statement over more rows would hold its locks too long.
MAX_BATCH = 100_000
#: The statuses ``Retention(failed=...)`` keeps for its own period: the runs that went wrong.
FAILED_STATUSES: frozenset[TaskStatus] = frozenset({TaskStatus.FAILED, TaskStatus.LOST})
#: Every table whose rows belong to one task (by ``task_id``), deleted with it.
#: tests/stores/test_retention_tables.py checks it against every migration.
TASK_TABLES = (
    "transitions",
    "commands",
    "idempotency_keys",
    "durable_runs",
    "durable_steps",
    "durable_facts",
    "durable_effects",
    "trace_carriers",
)
#: What every backend's selection adds (the ``NOT EXISTS`` of a live child).
DEPENDANTS_RULE = "a task with a child that is not terminal is never pruned"

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*(w|d|h|m|s)$")
_UNITS = {"w": 604_800.0, "d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}
_TERMINAL_NAMES = ", ".join(sorted(TERMINAL_STATUSES))


def parse_age(text: str, *, field: str = "older_than") -> timedelta:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"2w"`` as a timedelta (positive)."""
    if isinstance(text, timedelta):
        return check_period(text, field=field)
    if not isinstance(text, str):
        raise InvalidRetention(field, f"must be an age like '7d', got {text!r}", _AGE_FIX)
    cleaned = text.strip().lower()
    if cleaned.startswith("-"):
        raise InvalidRetention(field, f"{text!r} is negative", "give a positive age like '7d'")
    match = _AGE.match(cleaned)
    if match is None:
        raise InvalidRetention(field, f"{text!r} does not parse as an age", _AGE_FIX)
    return check_period(
        timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)]), field=field
    )


_AGE_FIX = "write a number and a unit: 90s, 30m, 12h, 7d or 2w"


def check_period(period: object, *, field: str) -> timedelta:
    """A positive, finite timedelta, or :class:`InvalidRetention` naming ``field``."""
    if not isinstance(period, timedelta):
        raise InvalidRetention(field, f"must be a timedelta, got {period!r}", _AGE_FIX)
    seconds = period.total_seconds()
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidRetention(field, f"{period} is not positive", "give a period above zero")
    if period > timedelta(days=36_500):
        raise InvalidRetention(field, f"{period} is over 100 years", "use None: keep forever")
    return period


def format_age(period: timedelta) -> str:
    """A spelling :func:`parse_age` reads back, in the largest whole unit (``7d``, ``36h``)."""
    seconds = period.total_seconds()
    for unit in ("d", "h", "m"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def check_batch(batch: object, *, field: str = "batch") -> int:
    """An int in 1..MAX_BATCH, or :class:`InvalidRetention` naming ``field``."""
    if isinstance(batch, bool) or not isinstance(batch, int):
        raise InvalidRetention(field, f"must be an int, got {batch!r}", "give 1 or more")
    if batch < 1:
        raise InvalidRetention(field, f"{batch} is not positive", "give 1 or more")
    if batch > MAX_BATCH:
        raise InvalidRetention(
            field, f"{batch} is over {MAX_BATCH}", "smaller batches hold locks for less time"
        )
    return batch


def parse_statuses(values: Iterable[str], *, field: str = "status") -> frozenset[TaskStatus]:
    """Terminal statuses by name; an unknown or non-terminal one is :class:`InvalidRetention`."""
    found: set[TaskStatus] = set()
    for value in values:
        try:
            status = TaskStatus(str(value).strip().lower())
        except ValueError:
            raise InvalidRetention(
                field, f"{value!r} is not a status", f"use a terminal status: {_TERMINAL_NAMES}"
            ) from None
        if status not in TERMINAL_STATUSES:
            raise InvalidRetention(
                field,
                f"{status} is not terminal (a task there may still run)",
                f"only terminal tasks are pruned: {_TERMINAL_NAMES}",
            )
        found.add(status)
    return frozenset(found)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PruneSelection:
    """The terminal tasks one prune rule deletes: finished before ``finished_before``.

    ``statuses`` (terminal only), ``names`` (``None``: any name),
    ``exclude_names`` (names another rule keeps for their own period) and
    ``task_ids`` (``None``: any task) narrow it further.
    """

    finished_before: datetime
    statuses: frozenset[TaskStatus] = TERMINAL_STATUSES
    names: frozenset[str] | None = None
    exclude_names: frozenset[str] = frozenset()
    task_ids: frozenset[str] | None = None

    def matches(
        self, *, status: str, name: str, task_id: str, finished_at: datetime | None
    ) -> bool:
        """Whether a stored task falls in this selection (the in-memory store's rule)."""
        return (
            status in self.statuses
            and status in TERMINAL_STATUSES
            and finished_at is not None
            and finished_at < self.finished_before
            and (self.names is None or name in self.names)
            and name not in self.exclude_names
            and (self.task_ids is None or task_id in self.task_ids)
        )


def check_selection(selection: object) -> PruneSelection:
    """A selection a store may apply: terminal statuses only, an aware cut."""
    if not isinstance(selection, PruneSelection):
        raise InvalidRetention(
            "selection", f"must be a PruneSelection, got {selection!r}", "build one"
        )
    cut = selection.finished_before
    if not isinstance(cut, datetime) or cut.tzinfo is None or cut.utcoffset() is None:
        raise InvalidRetention(
            "finished_before", f"must be an aware datetime, got {cut!r}", "pass one in UTC"
        )
    if not selection.statuses:
        raise InvalidRetention("status", "no status given", f"name at least one: {_TERMINAL_NAMES}")
    parse_statuses(selection.statuses)
    return selection


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """How long terminal tasks stay in the store (``None``: forever).

    ``terminal``: every terminal task; ``failed``: ``failed`` and ``lost``
    tasks instead (the runs someone may need to look into); ``by_name``: a
    task name's own period for every terminal status, above both.
    ``idempotency_window``: the least any period may be (see the module
    docstring). ``batch``: tasks per prune statement; ``interval``: seconds
    between a worker's background prunes; ``pause``: seconds between its
    batches, which keeps the background rate low.
    """

    terminal: timedelta | None = timedelta(days=7)
    failed: timedelta | None = None
    by_name: Mapping[str, timedelta | None] = dataclasses.field(default_factory=dict)
    idempotency_window: timedelta = DEFAULT_IDEMPOTENCY_WINDOW
    batch: int = DEFAULT_BATCH
    interval: float = 60.0
    pause: float = 0.1

    def __post_init__(self) -> None:
        window = check_period(self.idempotency_window, field="idempotency_window")
        periods: list[tuple[str, timedelta | None]] = [
            ("terminal", self.terminal),
            ("failed", self.failed),
        ]
        if not isinstance(self.by_name, Mapping):
            raise InvalidRetention(
                "by_name", f"must be a mapping, got {self.by_name!r}", "{name: timedelta}"
            )
        for name in self.by_name:
            if not isinstance(name, str) or not name:
                raise InvalidRetention(
                    "by_name", f"{name!r} is not a task name", "key it by task name"
                )
        periods += [(f"by_name[{name!r}]", period) for name, period in self.by_name.items()]
        for field, period in periods:
            if period is None:
                continue
            check_period(period, field=field)
            check_window(period, window, field=field)
        check_batch(self.batch)
        for field, seconds in (("interval", self.interval), ("pause", self.pause)):
            ok = isinstance(seconds, int | float) and not isinstance(seconds, bool)
            if not ok or not math.isfinite(seconds) or seconds < 0:
                raise InvalidRetention(
                    field, f"{seconds!r} is not a number of seconds", "give seconds >= 0"
                )
        if self.interval <= 0:
            raise InvalidRetention("interval", f"{self.interval} is not positive", "give > 0")
        object.__setattr__(self, "by_name", dict(self.by_name))

    def __hash__(self) -> int:  # by_name is a dict: hash its items
        named = tuple(sorted(self.by_name.items()))
        return hash((self.terminal, self.failed, named, self.idempotency_window, self.batch))


def check_window(period: timedelta, window: timedelta, *, field: str) -> None:
    """:class:`RetentionTooShort` when ``period`` is under the idempotency ``window``."""
    if period < window:
        raise RetentionTooShort(field, format_age(period), format_age(window))


def selections(retention: Retention, now: datetime) -> list[PruneSelection]:
    """The rules of ``retention`` at ``now``: by-name periods first, then failed, then terminal."""
    rules: list[PruneSelection] = []
    named = frozenset(retention.by_name)
    for name, period in sorted(retention.by_name.items()):
        if period is not None:
            rules.append(PruneSelection(finished_before=now - period, names=frozenset({name})))
    others = TERMINAL_STATUSES - FAILED_STATUSES
    if retention.failed is not None:
        rules.append(
            PruneSelection(
                finished_before=now - retention.failed,
                statuses=FAILED_STATUSES,
                exclude_names=named,
            )
        )
    if retention.terminal is not None:
        statuses = others if retention.failed is not None else TERMINAL_STATUSES
        rules.append(
            PruneSelection(
                finished_before=now - retention.terminal, statuses=statuses, exclude_names=named
            )
        )
    return rules
