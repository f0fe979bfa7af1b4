"""Observers: optional hooks that see a controller's transitions, attempts, writes and commands.

Metrics (:mod:`chongming.web.metrics`) and traces (:mod:`chongming.web.tracing`)
are observers; so is anything a user writes by subclassing :class:`Observer`.
``Controller(observers=[...])`` hands them to :func:`wire`, which plugs one
:class:`Observers` fan-out into the three seams every event passes through:

- :meth:`ControllerHost.record <chongming.controller.host.ControllerHost.record>`
  (every transition of every run), ``register`` (every run that arrives,
  submitted or claimed) and ``spawn`` (every attempt's coroutine);
- the write-through's batch write (every state write to the store);
- the command applier and reconcile of the control plane;
- ``enqueue`` (:meth:`Observer.trace_carrier`: a trace context stored with the
  task) and the worker's claim (:meth:`Observer.claimed`: that context given
  back on the node that runs it).

Without observers each seam costs one ``is None`` test. The fan-out calls a
hook only on the members that override it (and have not named it in
:attr:`Observer.idle_hooks`), so a hook nobody needs costs a no-op call.
Hooks run on the event loop, so they must be cheap and must not block. A hook
that raises is logged and ignored: an observer can never fail a task, an
enqueue or a store write.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from chongming.errors import ConfigurationError, PayloadError
from chongming.scheduler.limits import AdmissionStatistics
from chongming.state.status import TaskStatus

if TYPE_CHECKING:
    from chongming.controller.host import ControllerHost
    from chongming.plane.failures import PersistFailures
    from chongming.plane.plane import ControlPlane
    from chongming.plane.reconcile import ReconcileReport
    from chongming.stores.base import TaskStore
    from chongming.stores.nodes import Command
    from chongming.stores.writes import StateWrite, WriteResult

__all__ = ["Observer", "Observers", "RuntimeFacts", "wire"]

_log = logging.getLogger("chongming.observers")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeFacts:
    """What a metrics scrape reads of one controller at one moment (no store read)."""

    owner: str
    counts: dict[TaskStatus, int]
    admission: AdmissionStatistics
    persist: PersistFailures | None
    lease_renewals: int
    commands_applied: int
    commands_released: int


class Observer:
    """Every hook is a no-op; override the ones you need (see the module docstring)."""

    #: Hooks this observer overrides but does not need now, by name: the fan-out never
    #: calls them. Set it in ``__init__`` or ``attached`` (tracing without an SDK does).
    idle_hooks: frozenset[str] = frozenset()

    def attached(self, facts: Callable[[], RuntimeFacts]) -> None:
        """The controller this observer watches; ``facts()`` reads it at any moment."""

    def registered(self, run: Any) -> None:
        """A run arrived (submitted here or claimed from the queue), in the caller's context."""

    def transition(self, run: Any, previous: TaskStatus) -> None:
        """``run`` moved from ``previous`` to ``run.status`` (``run.last_transition``)."""

    def wrap_attempt(self, run: Any, coro: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        """The coroutine that carries one attempt; return it, or one that awaits it.

        A wrapper must await ``coro`` whatever happens to its own bookkeeping.
        """
        return coro

    def wrap_step(
        self, run: Any, kind: str, name: str, journal: Any, call: Coroutine[Any, Any, Any]
    ) -> Coroutine[Any, Any, Any]:
        """One durable call of a task's attempt, in the attempt's own flow: return ``call``,
        or a coroutine that awaits it.

        ``kind``: ``step``, ``effect``, ``sleep`` or ``fact`` (``ctx.wait_for_fact``);
        ``name`` is its name or op key; ``journal.replays`` counts the recorded
        outcomes the attempt replayed so far (more after the call: it replayed).
        Called only for durable tasks, and only when an observer takes it.
        """
        return call

    def trace_carrier(self) -> Mapping[str, str] | None:
        """At ``enqueue``, in the caller's context: what to store with the task for tracing.

        A small str -> str mapping (a W3C ``traceparent`` / ``tracestate``),
        written with the task in the same write and handed to :meth:`claimed`
        on the node that claims it. ``None``: nothing. Members' carriers are
        merged; one that is not a str -> str mapping, or that would make the
        whole exceed :data:`~chongming.stores.queue.MAX_TRACE_CARRIER` bytes,
        is dropped (logged at debug level) and the enqueue goes on.
        """
        return None

    def claimed(self, run: Any, carrier: Mapping[str, str]) -> None:
        """A run claimed from the queue arrived with the carrier its enqueue stored.

        Called after :meth:`registered`, before its first attempt; only when a
        carrier was stored, and only on a worker with an observer that overrides
        this hook (the worker reads the carriers only then).
        """

    def write_started(self, writes: Sequence[StateWrite]) -> object:
        """A batch of state writes goes to the store; the result is given to write_ended."""
        return None

    def write_ended(
        self,
        token: object,
        writes: Sequence[StateWrite],
        seconds: float,
        results: Sequence[WriteResult] | None,
        error: BaseException | None,
    ) -> None:
        """The batch came back (``results``) or raised (``error``) after ``seconds``."""

    def command_applied(self, command: Command, outcome: str | None, seconds: float) -> None:
        """This node applied ``command`` (``seconds``: from its creation to now)."""

    def reconciled(self, report: ReconcileReport) -> None:
        """A reconcile ran (explicit or periodic; a dry run too)."""


class _Facts:
    """Reads a controller's :class:`RuntimeFacts` (the host and plane stay private)."""

    __slots__ = ("_host", "_owner", "_plane")

    def __init__(self, owner: str, host: ControllerHost, plane: ControlPlane | None) -> None:
        self._owner = owner
        self._host = host
        self._plane = plane

    def __call__(self) -> RuntimeFacts:
        plane = self._plane
        return RuntimeFacts(
            owner=self._owner,
            counts=self._host.counts(),
            admission=self._host.admission(),
            persist=None if plane is None else plane.failures(),
            lease_renewals=0 if plane is None else plane.node.renewals,
            commands_applied=0 if plane is None else plane.commands.applied,
            commands_released=0 if plane is None else plane.commands.released,
        )


class Observers(Observer):
    """Several observers as one; each hook is guarded, so one bad observer harms nothing.

    Each hook goes to the members that take it (see the module docstring),
    chosen when built and again once every member is :meth:`attached`.
    """

    def __init__(self, members: Iterable[Observer]) -> None:
        self.members = tuple(members)
        for member in self.members:
            if not isinstance(member, Observer):
                raise ConfigurationError(
                    f"observers must be chongming Observer instances, got {member!r}"
                )
        self._select()

    def _select(self) -> None:
        members = self.members
        self._registering = _taking(members, "registered")
        self._wrapping = _taking(members, "wrap_attempt")
        self._stepping = _taking(members, "wrap_step")
        #: True when a member wraps durable calls (the host hands the journal ``wrap_step``).
        self.wraps_steps = bool(self._stepping)
        self._carrying = _taking(members, "trace_carrier")
        self._claiming = _taking(members, "claimed")
        self._writing = _taking(members, "write_started", "write_ended")
        #: True when a member wants the carriers of claimed runs (the worker reads them).
        self.follows_carriers = bool(self._claiming)
        # The hot hooks, per run and per transition: a hook nobody takes is a no-op, and
        # the one member that takes the transition hook is called directly. The host
        # calls it last in record() and the run logs what it raises, so no guard is
        # needed for bookkeeping's sake.
        watching = self._watching = _taking(members, "transition")
        hooks: dict[str, Any] = {
            "transition": (
                None
                if len(watching) > 1
                else (watching[0].transition if watching else _ignore_transition)
            ),
            "registered": None if self._registering else _ignore_run,
            "wrap_attempt": None if self._wrapping else _pass_attempt,
        }
        for name, hook in hooks.items():
            if hook is None:
                self.__dict__.pop(name, None)  # the fan-out's own method
            else:
                setattr(self, name, hook)

    def attached(self, facts: Callable[[], RuntimeFacts]) -> None:
        for member in self.members:
            _guard(member.attached, facts)
        self._select()  # a member may have found itself idle (or busy) on attaching

    def registered(self, run: Any) -> None:
        for member in self._registering:
            _guard(member.registered, run)

    def transition(self, run: Any, previous: TaskStatus) -> None:
        for member in self._watching:
            try:
                member.transition(run, previous)
            except Exception:
                _log.exception("observer %r failed on a transition", member)

    def wrap_attempt(self, run: Any, coro: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        for member in self._wrapping:
            try:
                coro = member.wrap_attempt(run, coro)
            except Exception:
                _log.exception("observer %r failed to wrap an attempt", member)
        return coro

    def wrap_step(
        self, run: Any, kind: str, name: str, journal: Any, call: Coroutine[Any, Any, Any]
    ) -> Coroutine[Any, Any, Any]:
        for member in self._stepping:
            try:
                call = member.wrap_step(run, kind, name, journal, call)
            except Exception:
                _log.exception("observer %r failed to wrap a durable call", member)
        return call

    def trace_carrier(self) -> dict[str, str] | None:
        """The members' carriers merged and checked; never raises (see :class:`Observer`)."""
        from chongming.stores.queue import check_trace_carrier

        merged: dict[str, str] = {}
        for member in self._carrying:
            found = _guard(member.trace_carrier)
            try:
                carrier = check_trace_carrier(found)
                if carrier:
                    carrier = check_trace_carrier({**merged, **carrier})
            except PayloadError as error:
                _log.debug("dropping the trace carrier of %r: %s", member, error.reason)
                continue
            if carrier:
                merged = carrier
        return merged or None

    def claimed(self, run: Any, carrier: Mapping[str, str]) -> None:
        for member in self._claiming:
            _guard(member.claimed, run, carrier)

    async def store_write(
        self, store: TaskStore, writes: Sequence[StateWrite]
    ) -> list[WriteResult]:
        """``store.apply_writes(writes)``, reported to every member before and after."""
        tokens = [(member, _guard(member.write_started, writes)) for member in self._writing]
        started = time.perf_counter()
        results: list[WriteResult] | None = None
        error: BaseException | None = None
        try:
            results = await store.apply_writes(writes)
            return results
        except BaseException as raised:
            error = raised
            raise
        finally:
            seconds = time.perf_counter() - started
            for member, token in tokens:
                _guard(member.write_ended, token, writes, seconds, results, error)

    def command_applied(self, command: Command, outcome: str | None, seconds: float) -> None:
        """``seconds``: from the command's creation to its outcome, by the controller's clock."""
        for member in self.members:
            _guard(member.command_applied, command, outcome, seconds)

    def reconciled(self, report: ReconcileReport) -> None:
        for member in self.members:
            _guard(member.reconciled, report)


def _taking(members: Sequence[Observer], *hooks: str) -> tuple[Observer, ...]:
    """The members that override any of ``hooks`` and have not named them idle."""
    return tuple(
        member
        for member in members
        if any(
            getattr(type(member), hook) is not getattr(Observer, hook)
            and hook not in member.idle_hooks
            for hook in hooks
        )
    )


def _ignore_transition(run: Any, previous: TaskStatus) -> None:
    return None


def _ignore_run(run: Any) -> None:
    return None


def _pass_attempt(run: Any, coro: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
    return coro


def _guard(hook: Any, *args: Any) -> Any:
    try:
        return hook(*args)
    except Exception:
        _log.exception("observer hook %s failed", getattr(hook, "__qualname__", hook))
        return None


def wire(
    observers: Iterable[Observer] | None,
    owner: str,
    host: ControllerHost,
    plane: ControlPlane | None,
) -> Observers | None:
    """Plug ``observers`` into ``host`` and ``plane``; ``None`` (nothing to do) without any."""
    if observers is None:
        return None
    fan = Observers(observers)
    if not fan.members:
        return None
    host.observer = fan
    if plane is not None:
        plane.writer.observer = fan
        reconcile = plane.reconcile

        async def reconciled(**kwargs: Any) -> ReconcileReport:
            # Periodic and explicit reconciles both call plane.reconcile.
            report = await reconcile(**kwargs)
            fan.reconciled(report)
            return report

        plane.reconcile = reconciled  # type: ignore[method-assign]
    fan.attached(_Facts(owner, host, plane))
    return fan
