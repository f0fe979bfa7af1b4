"""The frozen view a controller gives of itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

__all__ = ["ControllerStats"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ControllerStats:
    """Counts at one moment.

    ``holding_slot`` counts tasks that occupy an execution slot (a paused
    task does); ``queued`` counts tasks waiting for one; ``per_bucket`` maps a
    bucket to its tasks holding a slot; ``cluster_slots`` the slots of each
    cluster-wide limit this node holds in the store.
    """

    total: int
    active: int
    by_status: Mapping[str, int]
    queued: int
    holding_slot: int
    max_parallel: int
    per_bucket: Mapping[int, int]
    per_resource: Mapping[str, int]
    persist_failures: int = 0
    #: Slots of each cluster-wide limit this node holds in the store now.
    cluster_slots: Mapping[str, int] = dataclasses.field(default_factory=dict)
