"""The journal's times and effects, as the dashboard reads them (records).

The durable port (:mod:`chongming.stores.ports.durable`) gives the runtime
what a replay needs: steps and facts without times, effects by key only.
A timeline needs more: when each step was recorded, when each fact was
sent, and the effects ledger (intent written, result committed). A store
that keeps no time (the in-memory one) answers ``None`` for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["EffectEntry", "JournalDetails"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EffectEntry:
    """One operation of the effects ledger (``ctx.effect``).

    ``committed``: its result and the commit are in (an operation only begun
    may have reached the outside world: its attempt ended before the commit).
    ``epoch``: the attempt that last began it (``None``: not kept).
    """

    op_key: str
    committed: bool
    result: Any = None
    epoch: int | None = None
    started_at: datetime | None = None
    done_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JournalDetails:
    """Step times by ``(name, occurrence)``, fact times by name, the effects by intent time."""

    step_times: Mapping[tuple[str, int], datetime] = dataclasses.field(default_factory=dict)
    fact_times: Mapping[str, datetime] = dataclasses.field(default_factory=dict)
    effects: Sequence[EffectEntry] = ()
