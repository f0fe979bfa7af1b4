"""What a worker node is told beyond its limits: rate limits and its pool, checked once.

``Controller(work=True, rate_limits={...}, pool=WorkerPool(...))`` and
``chongming worker --rate-limit ... --names/--tags/--exclude-tags/--versions``
both come here, so a bad value is refused alike, before anything is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from chongming.controller.pools import WorkerPool
from chongming.controller.rates import check_rate_limits
from chongming.errors import ConfigurationError
from chongming.stores.rates import RateLimit

__all__ = ["RateLimit", "WorkerOptions", "WorkerPool", "check_worker_options"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    """A worker's rate limits (tag -> limit) and its pool (empty: claims all it serves)."""

    rate_limits: Mapping[str, RateLimit] = dataclasses.field(default_factory=dict)
    pool: WorkerPool = dataclasses.field(default_factory=WorkerPool)


def check_worker_options(rate_limits: object, pool: object, *, work: bool) -> WorkerOptions:
    """The checked options, or a :class:`ConfigurationError` naming the field."""
    rates = check_rate_limits(rate_limits)
    if pool is not None and not isinstance(pool, WorkerPool):
        raise ConfigurationError(
            f"pool must be a WorkerPool(names=, tags=, exclude_tags=, versions=), "
            f"got {type(pool).__name__}"
        )
    if not work and (rates or (pool is not None and pool != WorkerPool())):
        raise ConfigurationError(
            "rate_limits and pool govern the tasks a worker claims from a shared store: "
            "Controller(store=..., work=True, ...)"
        )
    return WorkerOptions(rate_limits=rates, pool=pool or WorkerPool())
