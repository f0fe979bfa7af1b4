"""Prometheus metrics: an observer that counts what a controller does, and store-wide gauges.

``Controller(observers=[metrics])`` feeds the counters and histograms as
things happen: per transition one plain dict count keyed by the label values
(the run's compact history step gives them, no record is built), and when an
attempt ends, its duration from the timestamps of that history (its
``starting`` step and its end; nothing is kept per run meanwhile) into a
histogram kept on the loop. Both become metric families only at scrape time.
Gauges of the controller's own state (admission, write-through backlog,
lease renewals) are read at scrape time; :meth:`ChongmingMetrics.refresh_store` sets the
store-wide gauges (tasks by status, queue depth and running tasks per
bucket, nodes) from one ``task_counts`` and one ``nodes`` read, which the
dashboard's ``/metrics`` does before each scrape.

Label values are bounded: statuses, triggers and outcomes come from fixed
sets; task names are capped (``max_names``, the rest are ``"other"``);
buckets by the plane's bucket count; resources by the configured limits. No
task id is ever a label. The names are listed in ``docs/observability.md``.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from chongming.controller.observers import Observer, RuntimeFacts
from chongming.plane.reconcile import ReconcileReport
from chongming.run.task_run import steps_of
from chongming.state.status import CARRIER_STATUSES, TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.nodes import Command
from chongming.stores.writes import StateWrite, WriteResult
from chongming.web.extras import need
from chongming.web.security import allowed_hosts_for, host_allowed

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

__all__ = ["CONTENT_TYPE", "ChongmingMetrics", "metrics_app"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER = "other"
_STARTING = TaskStatus.STARTING
_CARRIERS = CARRIER_STATUSES
_STARTING_VALUE = _STARTING.value
_CARRIER_VALUES = frozenset(status.value for status in CARRIER_STATUSES)
#: Status value -> its index; a (from, to) pair is ``from * _WIDTH + to`` in a trigger's row.
_INDEX = {status.value: index for index, status in enumerate(TaskStatus)}
_WIDTH = len(_INDEX)
_PAIRS = [(source, target) for source in _INDEX for target in _INDEX]
#: Attempts last from milliseconds to hours.
ATTEMPT_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 300, 900, 3600, 4 * 3600)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class ChongmingMetrics(Observer):
    """See the module docstring. One instance may watch several controllers."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        max_names: int = 100,
        max_label_sets: int = 2000,
    ) -> None:
        pc = need("prometheus_client", "web")
        self.registry: CollectorRegistry = (
            registry if registry is not None else pc.CollectorRegistry()
        )
        self.max_names = max_names
        self.max_label_sets = max_label_sets
        r = self.registry
        # The two per-transition series are plain counts on the loop, exported at
        # scrape time by _RuntimeCollector: no lock and no child lookup per transition.
        #: trigger -> a row of counts, one per (from, to) pair (see _INDEX).
        self._transition_rows: dict[str, list[int]] = {}
        self.attempt_seconds: dict[tuple[str, str], _Histogram] = {}
        self.store_write_seconds = pc.Histogram(
            "chongming_store_write_seconds",
            "One batch of state writes to the store (write-through), start to answer.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.store_writes = pc.Counter(
            "chongming_store_writes",
            "State writes (one per task per batch) by outcome.",
            ["outcome"],
            registry=r,
        )
        self.command_latency = pc.Histogram(
            "chongming_command_apply_latency_seconds",
            "From a command's creation to its owner applying it, by kind.",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.reconcile_outcomes = pc.Counter(
            "chongming_reconcile_outcomes",
            "Tasks judged by reconcile, by outcome (dry runs included, see mode).",
            ["outcome", "mode"],
            registry=r,
        )
        self.store_tasks = pc.Gauge(
            "chongming_store_tasks", "Tasks in the store by status.", ["status"], registry=r
        )
        self.store_queue_depth = pc.Gauge(
            "chongming_store_queue_depth",
            "Queued tasks in the store per bucket ('none': no bucket).",
            ["bucket"],
            registry=r,
        )
        self.store_running = pc.Gauge(
            "chongming_store_running",
            "Tasks holding an execution carrier in the store, per bucket.",
            ["bucket"],
            registry=r,
        )
        self.store_nodes = pc.Gauge(
            "chongming_store_nodes",
            "Node rows in the store, live or expired.",
            ["state"],
            registry=r,
        )
        self._names: set[str] = set()
        self._started: dict[str, float] = {}
        self._facts: list[Callable[[], RuntimeFacts]] = []
        r.register(_RuntimeCollector(self))

    # -- the observer hooks -----------------------------------------------------------

    def attached(self, facts: Callable[[], RuntimeFacts]) -> None:
        self._facts.append(facts)

    def transition(self, run: Any, previous: TaskStatus) -> None:
        try:
            steps = steps_of(run)  # (version, from, to, at, trigger, actor, reason, attempt)
        except AttributeError:  # not a TaskRun
            self._transition_of(run, previous)
            return
        step = steps[-1]
        source, target, trigger = step[1], step[2], step[4]
        row = self._transition_rows.get(trigger)
        if row is None:
            row = self._transition_rows[trigger] = [0] * len(_PAIRS)
        row[_INDEX[source] * _WIDTH + _INDEX[target]] += 1
        if source in _CARRIER_VALUES and target not in _CARRIER_VALUES:  # an attempt ended
            self._attempt_ended(run.name, steps)

    def _attempt_ended(self, name: str, steps: Sequence[Any]) -> None:
        """Observe the attempt from its latest ``starting`` step to its last step."""
        index = len(steps) - 3  # usually: starting, running, the end
        if index < 0 or steps[index][2] != _STARTING_VALUE:
            index = len(steps) - 2
            while index >= 0 and steps[index][2] != _STARTING_VALUE:
                index -= 1
            if index < 0:
                return  # restored without its start (not a history this node can time)
        end = steps[-1]
        seconds = end[3] - steps[index][3]
        if seconds < 0.0:
            seconds = 0.0  # the clock went back
        histogram = self.attempt_seconds.get((name, end[2])) or self._attempt(name, end[2])
        histogram.buckets[bisect.bisect_left(histogram.bounds, seconds)] += 1  # observe()
        histogram.sum += seconds
        histogram.count += 1

    def _transition_of(self, run: Any, previous: TaskStatus) -> None:
        """The same counts for a run that is not a TaskRun (timed as they happen)."""
        status: TaskStatus = run.status
        trigger = run.last_transition.trigger
        row = self._transition_rows.get(trigger)
        if row is None:
            row = self._transition_rows[trigger] = [0] * len(_PAIRS)
        row[_INDEX[previous.value] * _WIDTH + _INDEX[status.value]] += 1
        if status is _STARTING:
            self._started[run.task_id] = time.perf_counter()
        elif previous in _CARRIERS and status not in _CARRIERS:
            began = self._started.pop(run.task_id, None)
            if began is not None:
                self._attempt(run.name, status.value).observe(time.perf_counter() - began)

    @property
    def transitions(self) -> dict[tuple[str, str, str], int]:
        """Transitions by (from, to, trigger); past ``max_label_sets`` triggers are "other"."""
        out: dict[tuple[str, str, str], int] = {}
        for trigger, row in list(self._transition_rows.items()):
            for (source, target), count in zip(_PAIRS, row, strict=True):
                if not count:
                    continue
                label = (source, target, trigger)
                if label not in out and len(out) >= self.max_label_sets:
                    label = (source, target, OTHER)
                out[label] = out.get(label, 0) + count
        return out

    def _attempt(self, name: str, outcome: str) -> _Histogram:
        if name not in self._names:
            if len(self._names) >= self.max_names:
                name = OTHER
            else:
                self._names.add(name)
        key = (name, outcome)
        histogram = self.attempt_seconds.get(key)
        if histogram is None:
            histogram = self.attempt_seconds[key] = _Histogram(ATTEMPT_BUCKETS)
        return histogram

    def write_ended(
        self,
        token: object,
        writes: Sequence[StateWrite],
        seconds: float,
        results: Sequence[WriteResult] | None,
        error: BaseException | None,
    ) -> None:
        self.store_write_seconds.observe(seconds)
        if results is None:
            self.store_writes.labels("error").inc(len(writes))
            return
        tally: dict[str, int] = {}
        for result in results:
            tally[result.outcome.value] = tally.get(result.outcome.value, 0) + 1
        for outcome, count in tally.items():
            self.store_writes.labels(outcome).inc(count)

    def command_applied(self, command: Command, outcome: str | None, seconds: float) -> None:
        self.command_latency.labels(command.kind.value).observe(seconds)

    def reconciled(self, report: ReconcileReport) -> None:
        mode = "dry_run" if report.dry_run else "apply"
        for entry in report.entries:
            self.reconcile_outcomes.labels(entry.outcome.value, mode).inc()

    # -- store-wide gauges ---------------------------------------------------------------

    async def refresh_store(self, store: TaskStore) -> None:
        """Set the store-wide gauges from one ``task_counts`` and one ``nodes`` read."""
        counts = await store.task_counts()
        nodes = await store.nodes()
        by_status: dict[str, int] = dict.fromkeys((s.value for s in TaskStatus), 0)
        queued: dict[str, int] = {}
        running: dict[str, int] = {}
        for count in counts:
            by_status[count.status.value] += count.count
            bucket = "none" if count.bucket is None else str(count.bucket)
            if count.status is TaskStatus.QUEUED:
                queued[bucket] = queued.get(bucket, 0) + count.count
            elif count.status in _CARRIERS:
                running[bucket] = running.get(bucket, 0) + count.count
        live = sum(1 for node in nodes if node.live)
        # No await from here on: a concurrent scrape never sees half-set gauges.
        for status, value in by_status.items():
            self.store_tasks.labels(status).set(value)
        for gauge, values in ((self.store_queue_depth, queued), (self.store_running, running)):
            gauge.clear()
            for bucket, value in values.items():
                gauge.labels(bucket).set(value)
        self.store_nodes.labels("live").set(live)
        self.store_nodes.labels("expired").set(len(nodes) - live)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        pc = need("prometheus_client", "web")
        data: bytes = pc.generate_latest(self.registry)
        return data


def metrics_app(
    metrics: ChongmingMetrics,
    store: TaskStore | None = None,
    *,
    allowed_hosts: Collection[str] | None = None,
) -> Any:
    """A bare ASGI app that answers every GET with ``metrics`` (no dashboard, no starlette).

    Mount it in your service (``app.mount("/metrics", metrics_app(m, store))``)
    or serve it alone. With ``store`` each scrape refreshes the store-wide
    gauges first. Add your own authentication in front if the port is public.
    ``allowed_hosts``: the ``Host`` names answered (loopback names always
    are, ``"*"`` any); others get 403, so a page of another site whose name
    was made to resolve to this machine cannot read the metrics (DNS
    rebinding). ``None`` (the default) answers any ``Host``: the service it
    is mounted in checks hosts itself. A bad list raises ``ValueError``.
    """
    allowed = None if allowed_hosts is None else allowed_hosts_for(allowed_hosts, None)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if not host_allowed(_host_of(scope), allowed):
            status, body, kind = 403, b"host not allowed\n", b"text/plain; charset=utf-8"
        elif scope["method"] not in ("GET", "HEAD"):
            status, body, kind = 405, b"method not allowed\n", b"text/plain; charset=utf-8"
        else:
            if store is not None:
                await metrics.refresh_store(store)
            status, body, kind = 200, metrics.exposition(), CONTENT_TYPE.encode()
        headers = [(b"content-type", kind), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )

    return app


def _host_of(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            return bytes(value).decode("latin-1")
    return None


class _Histogram:
    """A histogram kept on the event loop (no lock): bucket counts, sum and count."""

    __slots__ = ("bounds", "buckets", "count", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.buckets = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.buckets[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        from prometheus_client.utils import floatToGoString

        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, math.inf), self.buckets, strict=True):
            running += count
            out.append((floatToGoString(bound), running))  # type: ignore[no-untyped-call]
        return out


class _RuntimeCollector:
    """Scrape-time gauges of the watched controllers (no store read, no await)."""

    def __init__(self, metrics: ChongmingMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return ()  # described lazily: the families depend on what is attached

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        metrics = self._metrics
        transitions = CounterMetricFamily(
            "chongming_transitions",
            "Task transitions, by from status, to status and trigger.",
            labels=["from_status", "to_status", "trigger"],
        )
        for labels, count in sorted(metrics.transitions.items()):
            transitions.add_metric(list(labels), count)
        yield transitions
        attempts = HistogramMetricFamily(
            "chongming_attempt_duration_seconds",
            "Attempts from starting to the status they ended in, by task name and outcome.",
            labels=["name", "outcome"],
        )
        for (name, outcome), histogram in sorted(metrics.attempt_seconds.copy().items()):
            attempts.add_metric([name, outcome], histogram.cumulative(), histogram.sum)
        yield attempts
        facts = [read() for read in metrics._facts]
        local = GaugeMetricFamily(
            "chongming_tasks", "Tasks held by this process, by status.", labels=["status"]
        )
        totals: dict[TaskStatus, int] = dict.fromkeys(TaskStatus, 0)
        for fact in facts:
            for status, count in fact.counts.items():
                totals[status] += count
        for status, count in totals.items():
            local.add_metric([status.value], count)
        yield local
        waiting = GaugeMetricFamily(
            "chongming_admission_waiting", "Tasks waiting for a slot in this process."
        )
        waiting.add_metric([], sum(f.admission.waiting for f in facts))
        yield waiting
        running = GaugeMetricFamily(
            "chongming_admission_running", "Tasks holding a slot in this process."
        )
        running.add_metric([], sum(f.admission.running for f in facts))
        yield running
        yield _per(
            "chongming_running_per_bucket",
            "Tasks holding a slot in this process, per bucket.",
            "bucket",
            (f.admission.running_per_bucket for f in facts),
        )
        yield _per(
            "chongming_waiting_per_bucket",
            "Tasks waiting for a slot in this process, per bucket.",
            "bucket",
            (f.admission.waiting_per_bucket for f in facts),
        )
        yield _per(
            "chongming_running_per_resource",
            "Tasks holding a slot in this process, per limited resource (tag).",
            "resource",
            (f.admission.running_per_resource for f in facts),
        )
        failures = CounterMetricFamily(
            "chongming_persist_failures",
            "State writes the store refused (each is retried; nothing is dropped).",
        )
        pending = GaugeMetricFamily(
            "chongming_persist_pending_transitions", "Transitions not yet durable in the store."
        )
        failing = GaugeMetricFamily(
            "chongming_persist_failing", "1 while the store keeps refusing writes."
        )
        persisted = [f.persist for f in facts if f.persist is not None]
        failures.add_metric([], sum(p.failed_writes for p in persisted))
        pending.add_metric([], sum(p.pending_transitions for p in persisted))
        failing.add_metric([], 1 if any(p.failing_since is not None for p in persisted) else 0)
        yield failures
        yield pending
        yield failing
        renewals = CounterMetricFamily(
            "chongming_lease_renewals", "Node lease renewals written by this process."
        )
        renewals.add_metric([], sum(f.lease_renewals for f in facts))
        yield renewals
        applied = CounterMetricFamily(
            "chongming_commands_applied", "Commands this process claimed and applied."
        )
        applied.add_metric([], sum(f.commands_applied for f in facts))
        yield applied


def _per(name: str, documentation: str, label: str, maps: Iterable[Any]) -> Metric:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(name, documentation, labels=[label])
    merged: dict[str, int] = {}
    for mapping in maps:
        for key, value in mapping.items():
            merged[str(key)] = merged.get(str(key), 0) + value
    for key, value in sorted(merged.items()):
        family.add_metric([key], value)
    return family
