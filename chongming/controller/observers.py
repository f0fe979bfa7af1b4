"""Observers: optional hooks that see a controller's transitions, attempts, writes and commands.

Metrics (:mod:`chongming.web.metrics`) and traces (:mod:`chongming.web.tracing`)
are observers; so is anything a user writes by subclassing :class:`Observer`.
``Controller(observers=[...])`` hands them to :func:`wire`, which plugs one
:class:`Observers` fan-out into the three seams every event passes through:

- :meth:`ControllerHost.record <chongming.controller.host.ControllerHost.record>`
  (every transition of every run), ``register`` (every run that arrives,
  submitted or claimed) and ``spawn`` (every attempt's coroutine);
- the write-through's batch write (every state write to the store);
- the command applier and reconcile of the control plane.

Without observers each seam costs one ``is None`` test. Hooks run on the
event loop, so they must be cheap and must not block. A hook that raises is
logged and ignored: an observer can never fail a task or a store write.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from chongming.control.reconcile import ReconcileReport
from chongming.errors import ConfigurationError
from chongming.scheduler.limits import AdmissionStatistics
from chongming.state.status import TaskStatus
from chongming.stores.base import Command, TaskStore
from chongming.stores.writes import StateWrite, WriteResult

if TYPE_CHECKING:
    from chongming.control.failures import PersistFailures
    from chongming.control.plane import ControlPlane
    from chongming.controller.host import ControllerHost

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
    """Several observers as one; each hook is guarded, so one bad observer harms nothing."""

    def __init__(self, members: Iterable[Observer]) -> None:
        self.members = tuple(members)
        for member in self.members:
            if not isinstance(member, Observer):
                raise ConfigurationError(
                    f"observers must be chongming Observer instances, got {member!r}"
                )
        # The hot hook, per transition: call the one member that has it directly. The
        # host calls it last in record() and the run logs what it raises, so no guard
        # is needed for bookkeeping's sake.
        watching = [m for m in self.members if type(m).transition is not Observer.transition]
        if len(watching) <= 1:
            self.transition = (  # type: ignore[method-assign]
                watching[0].transition if watching else _ignore_transition
            )

    def attached(self, facts: Callable[[], RuntimeFacts]) -> None:
        for member in self.members:
            _guard(member.attached, facts)

    def registered(self, run: Any) -> None:
        for member in self.members:
            _guard(member.registered, run)

    def transition(self, run: Any, previous: TaskStatus) -> None:
        for member in self.members:
            try:
                member.transition(run, previous)
            except Exception:
                _log.exception("observer %r failed on a transition", member)

    def wrap_attempt(self, run: Any, coro: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        for member in self.members:
            try:
                coro = member.wrap_attempt(run, coro)
            except Exception:
                _log.exception("observer %r failed to wrap an attempt", member)
        return coro

    async def store_write(
        self, store: TaskStore, writes: Sequence[StateWrite]
    ) -> list[WriteResult]:
        """``store.apply_writes(writes)``, reported to every member before and after."""
        tokens = [(member, _guard(member.write_started, writes)) for member in self.members]
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

    def command_applied(self, command: Command, outcome: str | None, seconds: float = 0.0) -> None:
        if not seconds:
            seconds = max(0.0, time.time() - command.created_at.timestamp())
        for member in self.members:
            _guard(member.command_applied, command, outcome, seconds)

    def reconciled(self, report: ReconcileReport) -> None:
        for member in self.members:
            _guard(member.reconciled, report)


def _ignore_transition(run: Any, previous: TaskStatus) -> None:
    return None


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
