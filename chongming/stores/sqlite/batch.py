"""Planning one group-commit batch: which writes win, and in what statements.

Pure: given the queued writes (in submission order) and the stored versions
of the tasks they name, decide each write's outcome the way a one-by-one
execution would, and turn the winners into a few ``executemany`` phases.

Phases keep each row's statements in submission order: a statement goes into
the latest phase of its kind if that phase comes after every earlier
statement on the same row, otherwise into a new phase. Statements on
different rows commute, so a lock-step workload (many tasks doing the same
step) collapses into one phase per statement kind. Transitions commute with
everything (they are keyed by ``(task_id, version)`` and inserted with ``OR
IGNORE``), so they form one phase, in submission order, first writer wins.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from chongming.errors import DuplicateTaskId, StoreError, TaskNotFound, VersionConflict
from chongming.stores.columns import MUTABLE_COLUMNS
from chongming.stores.sqlite.rows import TASK_NAMES, TRANSITION_COLUMNS

__all__ = [
    "PATCH_TASK",
    "UPDATE_TASK",
    "AppendOp",
    "CommandOp",
    "CreateOp",
    "Phase",
    "Plan",
    "SaveOp",
    "TouchOp",
    "WriteOp",
    "plan_batch",
]

Row = tuple[Any, ...]

INSERT_TASK = (
    f"INSERT INTO tasks ({', '.join(TASK_NAMES)}) VALUES ({', '.join('?' * len(TASK_NAMES))})"
)
#: A compare-and-set save of the whole row (parameters: ``rows.full_update_row``).
UPDATE_TASK = (
    "UPDATE tasks SET "
    + ", ".join(f"{column} = ?" for column in TASK_NAMES[1:])
    + " WHERE task_id = ? AND status_version = ?"
)
#: A compare-and-set save of the mutable columns only (parameters: ``rows.patch_row``).
PATCH_TASK = (
    "UPDATE tasks SET "
    + ", ".join(f"{column.name} = ?" for column in MUTABLE_COLUMNS)
    + " WHERE task_id = ? AND status_version = ?"
)
TOUCH_TASK = (
    "UPDATE tasks SET progress = coalesce(?, progress),"
    " last_heartbeat_at = coalesce(?, last_heartbeat_at) WHERE task_id = ?"
    " AND (?4 IS NULL OR owner = ?4)"
)
INSERT_TRANSITION = (
    f"INSERT OR IGNORE INTO transitions ({', '.join(TRANSITION_COLUMNS)})"
    f" VALUES ({', '.join('?' * len(TRANSITION_COLUMNS))})"
)


@dataclasses.dataclass(slots=True, eq=False, kw_only=True)
class WriteOp:
    """A queued write and the future its caller awaits.

    ``group`` (non-zero) ties ops that must share one transaction
    (``apply_writes``): the writer never cuts a batch inside a group.
    """

    future: asyncio.Future[Any]
    group: int = 0


@dataclasses.dataclass(slots=True, eq=False, kw_only=True)
class CreateOp(WriteOp):
    task_id: str
    version: int
    row: Row
    transitions: list[Row]


@dataclasses.dataclass(slots=True, eq=False, kw_only=True)
class SaveOp(WriteOp):
    """``sql`` is UPDATE_TASK or PATCH_TASK; ``row`` its parameters, ending in the CAS."""

    task_id: str
    expect_version: int
    new_version: int
    sql: str
    row: Row
    transitions: list[Row]


@dataclasses.dataclass(slots=True, eq=False, kw_only=True)
class AppendOp(WriteOp):
    transitions: list[Row]


@dataclasses.dataclass(slots=True, eq=False, kw_only=True)
class TouchOp(WriteOp):
    task_id: str
    progress: str | None
    heartbeat: int | None
    owner: str | None = None


@dataclasses.dataclass(slots=True, eq=False, kw_only=True)
class CommandOp(WriteOp):
    """A command- or node-table operation; run one by one, in order, by the writer."""

    #: "submit" | "claim" | "complete" | "release"
    #: | "register_node" | "renew_node" | "release_node" | "nodes"
    #: | "enqueue" | "claim_tasks" | "start_claimed" (the work queue: ``sqlite/queue.py``)
    action: str
    params: tuple[Any, ...]


@dataclasses.dataclass(slots=True, kw_only=True)
class Phase:
    sql: str
    rows: list[Row] = dataclasses.field(default_factory=list)
    #: Every row must change exactly one row (``None``: no check, e.g. a touch of an unknown id).
    checked: bool = True


@dataclasses.dataclass(slots=True, kw_only=True)
class Plan:
    phases: list[Phase]
    transitions: list[Row]
    commands: list[CommandOp]
    #: Ops that lose (conflict, duplicate, unknown id) and the error each one gets.
    errors: dict[int, StoreError]


class _Phases:
    def __init__(self) -> None:
        self.phases: list[Phase] = []
        self._last_of_sql: dict[str, int] = {}
        self._last_of_row: dict[str, int] = {}

    def add(self, sql: str, key: str, row: Row, *, checked: bool = True) -> None:
        after = self._last_of_row.get(key, -1)
        index = self._last_of_sql.get(sql, -1)
        if index <= after:
            index = len(self.phases)
            self.phases.append(Phase(sql=sql, checked=checked))
            self._last_of_sql[sql] = index
        self.phases[index].rows.append(row)
        self._last_of_row[key] = index


def plan_batch(ops: list[WriteOp], versions: dict[str, int] | None, now_micros: int) -> Plan:
    """Decide every op of a batch against ``versions`` (task_id -> stored status_version).

    ``versions`` must hold every stored task named by a create or save in
    ``ops``. ``None`` plans optimistically: a task first named by a save is
    assumed to be at the expected version, one first named by a create to be
    absent. The writer then checks that every statement changed exactly one
    row and re-plans with the real versions if not, so the common case (no
    conflict with the database) costs no read.
    """
    optimistic = versions is None
    known: dict[str, int] = {} if versions is None else versions
    phases = _Phases()
    transitions: list[Row] = []
    commands: list[CommandOp] = []
    errors: dict[int, StoreError] = {}
    for op in ops:
        if isinstance(op, SaveOp):
            current = known.get(op.task_id)
            if current is None and optimistic:
                current = op.expect_version
            if current is None:
                errors[id(op)] = TaskNotFound(op.task_id)
            elif current != op.expect_version:
                errors[id(op)] = VersionConflict(op.task_id, op.expect_version, current)
            else:
                known[op.task_id] = op.new_version
                phases.add(op.sql, op.task_id, op.row)
                transitions.extend(op.transitions)
        elif isinstance(op, CreateOp):
            if op.task_id in known:
                errors[id(op)] = DuplicateTaskId(op.task_id)
            else:
                known[op.task_id] = op.version
                phases.add(INSERT_TASK, op.task_id, op.row)
                transitions.extend(op.transitions)
        elif isinstance(op, AppendOp):
            transitions.extend(op.transitions)
        elif isinstance(op, TouchOp):
            row = (op.progress, op.heartbeat, op.task_id, op.owner)
            phases.add(TOUCH_TASK, op.task_id, row, checked=False)
        elif isinstance(op, CommandOp):
            commands.append(op)
        else:  # pragma: no cover - a new op kind without a plan is a bug
            raise TypeError(f"unknown write op {type(op).__name__}")
    return Plan(phases=phases.phases, transitions=transitions, commands=commands, errors=errors)
