"""One worker's own metrics: :class:`ChongmingMetrics` plus the worker's claims, slots and ends.

``chongming worker --metrics-port`` serves :meth:`WorkerMetrics.exposition`
(the Prometheus text format, ``prometheus_client``'s) on ``/metrics``. It is
the dashboard's observer (:class:`~chongming.web.metrics.ChongmingMetrics`:
transitions, attempt durations, store write latency, reconcile outcomes,
lease renewals, admission, write-through backlog) without its store-wide
gauges — every worker of a fleet would report the same store — plus:

=================================  =======  ==============================================
name                               type     what
=================================  =======  ==============================================
``chongming_worker_claims``        counter  tasks claimed from the queue and taken to run here
``chongming_worker_starts``        counter  attempts started here (``-> starting``)
``chongming_worker_ends``          counter  tasks that ended here, by terminal ``status``
``chongming_worker_parks``         counter  durable tasks parked here (a long sleep or wait)
``chongming_worker_slots_used``    gauge    tasks holding one of ``max_parallel`` slots
``chongming_worker_slots_free``    gauge    ``max_parallel`` minus the slots used
``chongming_worker_max_parallel``  gauge    the limit itself
``chongming_worker_info``          gauge    1, labelled with ``owner`` and ``version``
=================================  =======  ==============================================

Starts, ends and parks are read at scrape time from the transition counts the
base observer keeps anyway; claims are counted by the ``registered`` hook (a
run that arrives with a stored snapshot was claimed; one that arrives
``starting`` was started by its claim, and counts as a start). Nothing is added per
transition. ``exposition()`` runs on the loop (it reads the controller).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from typing import TYPE_CHECKING, Any

from chongming.controller.observers import Observer, RuntimeFacts
from chongming.state.status import ACTIVE_STATUSES, TERMINAL_STATUSES, TaskStatus
from chongming.state.triggers import Trigger
from chongming.web.extras import need
from chongming.web.metrics import ChongmingMetrics

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

__all__ = ["WorkerMetrics"]

_TERMINAL = frozenset(status.value for status in TERMINAL_STATUSES)
_STARTING = TaskStatus.STARTING.value


class WorkerMetrics(Observer):
    """Hand :meth:`observers` to the worker's ``Controller(observers=...)``."""

    def __init__(self, *, owner: str, max_parallel: int, max_names: int = 100) -> None:
        need("prometheus_client", "metrics")
        self.base = ChongmingMetrics(max_names=max_names)
        self.registry = self.base.registry
        for store_wide in (
            self.base.store_tasks,
            self.base.store_queue_depth,
            self.base.store_running,
            self.base.store_nodes,
        ):
            self.registry.unregister(store_wide)
        self.owner = owner
        self.max_parallel = max_parallel
        self.claims = 0
        self.started_by_claims = 0
        self._facts: list[Callable[[], RuntimeFacts]] = []
        self.registry.register(_WorkerCollector(self))

    def observers(self) -> list[Observer]:
        return [self.base, self]

    def attached(self, facts: Callable[[], RuntimeFacts]) -> None:
        self._facts.append(facts)

    def registered(self, run: Any) -> None:
        adopted = getattr(run, "adopted", None)
        if adopted is not None:
            self.claims += 1
            if adopted.status is TaskStatus.STARTING:
                self.started_by_claims += 1  # its claim wrote ``starting``: no local transition

    def exposition(self) -> bytes:
        return self.base.exposition()

    def slots_used(self) -> int:
        used = 0
        for read in self._facts:
            counts = read().counts
            used += sum(counts.get(status, 0) for status in ACTIVE_STATUSES)
        return used


class _WorkerCollector:
    def __init__(self, metrics: WorkerMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        metrics = self._metrics
        starts = metrics.started_by_claims
        parks = 0
        ends: dict[str, int] = dict.fromkeys(sorted(_TERMINAL), 0)
        for (_source, target, trigger), count in metrics.base.transitions.items():
            if target == _STARTING:
                starts += count
            elif target in _TERMINAL:
                ends[target] += count
            if trigger == Trigger.PARKED:
                parks += count
        claims = CounterMetricFamily(
            "chongming_worker_claims", "Tasks claimed from the queue and taken to run here."
        )
        claims.add_metric([], metrics.claims)
        yield claims
        started = CounterMetricFamily("chongming_worker_starts", "Attempts started here.")
        started.add_metric([], starts)
        yield started
        ended = CounterMetricFamily(
            "chongming_worker_ends", "Tasks that ended here, by terminal status.", labels=["status"]
        )
        for status, count in ends.items():
            ended.add_metric([status], count)
        yield ended
        parked = CounterMetricFamily(
            "chongming_worker_parks", "Durable tasks parked here (a long sleep or fact wait)."
        )
        parked.add_metric([], parks)
        yield parked
        used = metrics.slots_used()
        for name, help_text, value in (
            ("chongming_worker_slots_used", "Tasks holding a slot here.", used),
            (
                "chongming_worker_slots_free",
                "Slots free here.",
                max(0, metrics.max_parallel - used),
            ),
            (
                "chongming_worker_max_parallel",
                "Tasks this worker runs at once.",
                metrics.max_parallel,
            ),
        ):
            gauge = GaugeMetricFamily(name, help_text)
            gauge.add_metric([], value)
            yield gauge
        info = GaugeMetricFamily(
            "chongming_worker_info",
            "This worker: its owner name and chongming's version.",
            labels=["owner", "version"],
        )
        info.add_metric([metrics.owner, _version()], 1)
        yield info


def _version() -> str:
    try:
        return installed_version("chongming")
    except PackageNotFoundError:
        return "unknown"
