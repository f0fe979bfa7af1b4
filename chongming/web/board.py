"""What the dashboard reads and sends, through a :class:`~chongming.Controller` only.

No SQL and no store internals here: the list is one :class:`TaskQuery`
(the stores answer it from their indexes, ordered by creation), a task is
``get`` + ``history`` + its commands, and a control is the controller's
``stop`` / ``pause`` / ``resume`` — the same calls ``chongming stop`` makes,
so a command reaches a task held by another process exactly as from the CLI,
and nothing but a registered task's id and a reason ever travels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from chongming.controller.statistics import count_tasks
from chongming.errors import ConfigurationError, PayloadError
from chongming.plane.buckets import BucketReport
from chongming.plane.reconcile import ReconcileReport
from chongming.plane.waiting import WaitingReason, waiting_reasons
from chongming.state.payload import check_reason, check_task_id
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import ACTIVE_STATUSES, TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.limits import ClusterLimit
from chongming.stores.nodes import CommandRecord, NodeRecord, TaskCount
from chongming.stores.rates import RateLimit
from chongming.stores.schedules import ScheduleRecord
from chongming.stores.search import TaskSearch
from chongming.web.journal import NO_JOURNAL, Journal, read_journal
from chongming.web.search import SearchTerms

if TYPE_CHECKING:
    from chongming.controller.controller import Controller

__all__ = [
    "CONTROLS",
    "MAX_PAGE",
    "PAGE_SIZE",
    "BadInput",
    "ControlResult",
    "ListFilter",
    "NodesView",
    "TaskPage",
    "TaskView",
    "control",
    "list_page",
    "nodes_view",
    "store_counts",
    "task_view",
]

PAGE_SIZE = 50
#: Pages past this are refused: page N reads N * size rows (the query has no cursor).
MAX_PAGE = 100
CONTROLS = ("stop", "pause", "resume")
_FIELD_LIMIT = 200


class BadInput(ValueError):
    """A filter or form field the dashboard refuses (shown to the user, status 400)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ListFilter:
    """The list page's filters, as parsed from the query string."""

    status: str = "active"  # "active", "all" or one status value
    tag: str | None = None
    bucket: int | None = None
    owner: str | None = None
    name: str | None = None
    page: int = 1
    search: SearchTerms | None = None  # label, key, from, to (chongming.web.search)

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> ListFilter:
        status = (params.get("status") or "active").strip()
        if status not in ("active", "all") and status not in TaskStatus.__members__.values():
            raise BadInput(f"unknown status {status!r}")
        bucket_text = (params.get("bucket") or "").strip()
        page_text = (params.get("page") or "1").strip()
        try:
            bucket = int(bucket_text) if bucket_text else None
            page = int(page_text)
        except ValueError:
            raise BadInput("bucket and page must be whole numbers") from None
        if bucket is not None and bucket < 0:
            raise BadInput("bucket must be >= 0")
        if not 1 <= page <= MAX_PAGE:
            raise BadInput(f"page must be between 1 and {MAX_PAGE}")
        try:
            search = SearchTerms.parse(params)
        except ValueError as error:
            raise BadInput(str(error)) from None
        return cls(
            status=status,
            tag=_text(params, "tag"),
            bucket=bucket,
            owner=_text(params, "owner"),
            name=_text(params, "name"),
            page=page,
            search=search,
        )

    def statuses(self) -> frozenset[TaskStatus] | None:
        if self.status == "all":
            return None
        if self.status == "active":
            return ACTIVE_STATUSES
        return frozenset({TaskStatus(self.status)})

    def params(self, **changes: object) -> dict[str, str]:
        """The filter as query parameters (defaults left out), with ``changes`` applied."""
        values = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        out: dict[str, str] = {}
        if values.status != "active":
            out["status"] = values.status
        for field in ("tag", "owner", "name"):
            value = getattr(values, field)
            if value is not None:
                out[field] = value
        if values.bucket is not None:
            out["bucket"] = str(values.bucket)
        if values.search is not None:
            out.update(values.search.params())
        if values.page != 1:
            out["page"] = str(values.page)
        return out


def _text(params: Mapping[str, str], field: str) -> str | None:
    value = (params.get(field) or "").strip()
    if not value:
        return None
    if len(value) > _FIELD_LIMIT or "\x00" in value:
        raise BadInput(f"{field} is too long or holds a NUL character")
    return value


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskPage:
    filter: ListFilter
    tasks: Sequence[TaskSnapshot]
    has_next: bool
    counts: Mapping[str, int]  # status -> tasks in the store (every owner, every bucket)
    #: Why each queued task on the page waits, by task id (chongming.plane.waiting).
    waiting: Mapping[str, WaitingReason] = dataclasses.field(default_factory=dict)


async def list_page(
    controller: Controller, wanted: ListFilter, *, size: int = PAGE_SIZE, counts: bool = True
) -> TaskPage:
    """One page of the list: ``size`` tasks, oldest first, and whether another follows."""
    try:
        query = TaskQuery(
            statuses=wanted.statuses(),
            tag=wanted.tag,
            bucket=wanted.bucket,
            owner=wanted.owner,
            name=wanted.name,
            limit=wanted.page * size + 1,
        )
    except ConfigurationError as error:
        raise BadInput(str(error)) from None
    found = await _found(controller, query, wanted.search)
    start = (wanted.page - 1) * size
    shown = found[start : start + size]
    return TaskPage(
        filter=wanted,
        tasks=shown,
        has_next=len(found) > start + size,
        counts=await store_counts(controller) if counts else {},
        waiting=await why_waiting(controller, shown),
    )


async def _found(
    controller: Controller, query: TaskQuery, terms: SearchTerms | None
) -> list[TaskSnapshot]:
    """The list query, or the store's search when the list has search terms."""
    if terms is None:
        return await controller.list_tasks(query)
    search = TaskSearch(
        query=query,
        label=terms.label,
        idempotency_key=terms.key,
        created_from=terms.created_from,
        created_to=terms.created_to,
    )
    store = controller.store
    try:
        return [] if store is None else await store.search_tasks(search)
    except NotImplementedError:
        raise BadInput("this store cannot search by label, key or time (no search_tasks)") from None


async def store_counts(controller: Controller) -> dict[str, int]:
    """Tasks per status in the whole store (every owner, every bucket)."""
    store = controller.store
    if store is None:
        return {}
    return dict(count_tasks(await store.task_counts()).by_status)


async def why_waiting(
    controller: Controller, snapshots: Sequence[TaskSnapshot]
) -> dict[str, WaitingReason]:
    """Why each queued task among ``snapshots`` waits, by the store's clock."""
    store = controller.store
    if store is None or not any(s.status is TaskStatus.QUEUED for s in snapshots):
        return {}
    return await waiting_reasons(store, snapshots, now=await store.store_time())


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskView:
    snapshot: TaskSnapshot
    history: Sequence[Transition]
    commands: Sequence[CommandRecord]
    waiting: WaitingReason | None = None
    journal: Journal = NO_JOURNAL  # chongming.web.journal
    #: Its parent task (``ctx.child`` / ``ctx.spawn``), and its own children, oldest first.
    parent: str | None = None
    children: Sequence[TaskSnapshot] = ()
    #: Children beyond :data:`MAX_CHILDREN` (counted, not shown).
    more_children: int = 0


#: Children listed on a task's page; the rest are counted.
MAX_CHILDREN = 200


def checked_id(task_id: str) -> str:
    try:
        return check_task_id(task_id)
    except PayloadError as error:
        raise BadInput(f"invalid task id: {error.reason}") from None


async def task_view(controller: Controller, task_id: str) -> TaskView:
    """One task: its snapshot, its whole history and the commands sent to it."""
    task_id = checked_id(task_id)
    snapshot = await controller.get(task_id)
    history = await controller.history(task_id)
    store = controller.store
    commands = [] if store is None else await store.command_records(task_id=task_id, limit=50)
    waiting = (await why_waiting(controller, [snapshot])).get(task_id)
    journal = await read_journal(store, task_id, history)
    parent, children, more = await _family(store, task_id)
    return TaskView(
        snapshot=snapshot,
        history=history,
        commands=commands,
        waiting=waiting,
        journal=journal,
        parent=parent,
        children=children,
        more_children=more,
    )


async def _family(
    store: TaskStore | None, task_id: str
) -> tuple[str | None, list[TaskSnapshot], int]:
    """The task's parent and children, as the store links them (none without child tasks)."""
    if store is None:
        return None, [], 0
    try:
        parent = await store.parent_of(task_id)
        ids = await store.children_of(task_id)
    except NotImplementedError:
        return None, [], 0
    children = [found for child in ids[:MAX_CHILDREN] if (found := await store.get(child))]
    children.sort(key=lambda snapshot: (snapshot.created_at, snapshot.task_id))
    return parent, children, max(0, len(ids) - MAX_CHILDREN)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodesView:
    nodes: Sequence[NodeRecord]
    buckets: BucketReport
    limits: Sequence[ClusterLimit]
    counts: Sequence[TaskCount]
    schedules: Sequence[ScheduleRecord] = ()
    #: The fleet's rate limits as the store holds them (the store's declared value wins).
    rate_limits: Mapping[str, RateLimit] = dataclasses.field(default_factory=dict)


async def nodes_view(controller: Controller) -> NodesView:
    nodes = await controller.nodes()
    report = await controller.bucket_report()
    store = controller.store
    limits: list[ClusterLimit] = []
    if store is not None:
        try:
            limits = await store.cluster_limits()
        except NotImplementedError:
            limits = []
    schedules: list[ScheduleRecord] = []
    if store is not None:
        try:
            schedules = await store.schedules()
        except NotImplementedError:
            schedules = []
    rate_limits: dict[str, RateLimit] = {}
    if store is not None:
        try:
            rate_limits = await store.rate_limits()
        except NotImplementedError:
            rate_limits = {}
    return NodesView(
        nodes=nodes,
        buckets=report,
        limits=limits,
        counts=(),
        schedules=schedules,
        rate_limits=rate_limits,
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ControlResult:
    """What a control did: ``issued`` False when the task had already ended."""

    kind: str
    task_id: str
    issued: bool
    status: TaskStatus
    owner: str | None


async def control(
    controller: Controller, kind: str, task_id: str, reason: str | None, *, actor: str
) -> ControlResult:
    """``stop`` / ``pause`` / ``resume`` through the controller, as ``chongming stop`` does."""
    if kind not in CONTROLS:
        raise BadInput(f"unknown control {kind!r}")
    task_id = checked_id(task_id)
    reason = (reason or "").strip() or None
    try:
        reason = check_reason(reason)
    except PayloadError as error:
        raise BadInput(f"invalid reason: {error.reason}") from None
    snapshot = await controller.get(task_id)
    issued = False
    if not snapshot.is_terminal:
        if kind == "stop":
            issued = await controller.stop(task_id, reason=reason, actor=actor)
        elif kind == "pause":
            await controller.pause(task_id, reason=reason, actor=actor)
            issued = True
        else:
            await controller.resume(task_id, reason=reason, actor=actor)
            issued = True
    return ControlResult(
        kind=kind, task_id=task_id, issued=issued, status=snapshot.status, owner=snapshot.owner
    )


async def reconcile(controller: Controller, *, apply: bool, reason: str | None) -> ReconcileReport:
    reason = (reason or "").strip() or None
    try:
        reason = check_reason(reason)
    except PayloadError as error:
        raise BadInput(f"invalid reason: {error.reason}") from None
    return await controller.reconcile(dry_run=not apply, reason=reason)
