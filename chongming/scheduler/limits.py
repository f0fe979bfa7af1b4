"""Admission limits and the statistics record of an admission queue.

Plain data, validated once at construction so the queue's hot path never
re-checks them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from chongming.errors import ConfigurationError

__all__ = ["AdmissionLimits", "AdmissionStatistics"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionLimits:
    """How many items may hold an execution slot at once.

    ``max_parallel`` bounds everything; ``max_parallel_per_bucket`` bounds each
    bucket separately (``None``: no per-bucket bound; items without a bucket
    are never bounded by it); ``resource_limits`` bounds the running items that
    carry a tag (``{"io": 2}``). Tags without a limit are ignored here.
    Over any limit an item waits; nothing is ever rejected for being over.
    """

    max_parallel: int
    max_parallel_per_bucket: int | None = None
    resource_limits: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_positive("max_parallel", self.max_parallel)
        if self.max_parallel_per_bucket is not None:
            _check_positive("max_parallel_per_bucket", self.max_parallel_per_bucket)
        if not isinstance(self.resource_limits, Mapping):
            raise ConfigurationError(
                "resource_limits must be a mapping of tag to limit, "
                f"got {type(self.resource_limits).__name__}"
            )
        checked: dict[str, int] = {}
        for tag, limit in self.resource_limits.items():
            if not isinstance(tag, str) or not tag:
                raise ConfigurationError(
                    f"resource_limits keys must be non-empty tag strings, got {tag!r}"
                )
            _check_positive(f"resource_limits[{tag!r}]", limit)
            checked[tag] = limit
        # A private copy behind a read-only view: the caller's dict can change
        # later without changing a running queue's limits behind its back.
        object.__setattr__(self, "resource_limits", MappingProxyType(checked))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionStatistics:
    """A point-in-time view of an :class:`~chongming.scheduler.AdmissionQueue`.

    The per-bucket and per-resource mappings list only non-zero counts.
    """

    running: int
    waiting: int
    running_per_bucket: Mapping[int, int]
    waiting_per_bucket: Mapping[int, int]
    running_per_resource: Mapping[str, int]
    limits: AdmissionLimits


def _check_positive(what: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(f"{what} must be a positive integer, got {value!r}")
