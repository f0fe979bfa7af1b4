"""The audit vocabulary: every transition names what caused it (``component:event``)."""

from __future__ import annotations

__all__ = ["Trigger"]


class Trigger:
    DEPENDENCIES_RESOLVED = "orchestrator:dependencies_resolved"
    ENQUEUED = "orchestrator:enqueued"  # written down for whichever node serves it
    WAITING_FOR_DEPENDENCIES = "orchestrator:waiting_for_dependencies"
    UPSTREAM_FAILED = "orchestrator:upstream_not_succeeded"
    FAIL_FAST = "orchestrator:fail_fast"
    PIPELINE_CANCELLED = "orchestrator:pipeline_cancelled"
    DISPATCH = "scheduler:dispatch"
    START_TIMEOUT = "scheduler:start_timeout"
    LAUNCHED = "executor:launched"
    COMPLETED = "executor:completed"
    FAILED = "executor:failed"
    RESULT_INVALID = "executor:result_invalid"
    USER_STOP = "user:stop"
    USER_PAUSE = "user:pause"
    USER_RESUME = "user:resume"
    STOP_CONFIRMED = "runtime:stop_confirmed"
    STOP_ABANDONED = "runtime:stop_abandoned"
    TIMEOUT_ABANDONED = "runtime:timeout_abandoned"
    PAUSE_REACHED = "runtime:pause_reached"
    PAUSE_NOT_REACHED = "runtime:pause_not_reached"
    PAUSE_RELEASED = "runtime:pause_released"  # the function ended while paused
    INTERNAL_ERROR = "runtime:internal_error"  # the runtime's own bookkeeping failed
    RETRY_SCHEDULED = "runtime:retry_scheduled"
    RETRY_DUE = "runtime:retry_due"
    SHUTDOWN = "runtime:shutdown"
    LEASE_EXPIRED = "reconcile:lease_expired"
    RESUMED = "reconcile:resumed"  # a durable task back in the queue after a lost attempt
    RETRY_HANDED_BACK = "reconcile:retry_handed_back"  # a dead worker's retry_wait task requeued
    RETRY_RELEASED = "runtime:retry_released"  # a closing worker's retry_wait task requeued
    START_GIVEN_BACK = "runtime:start_given_back"  # a claimed start this node did not launch
    SLEEPING = "runtime:sleeping"  # a durable task parks for a long sleep or wait
    PARKED = "runtime:parked"  # back in the queue, claimable from its wake-up time
    HANDED_BACK = "runtime:handed_back"  # a closing worker gave its durable task back
