"""A claim that starts only what its rate limits grant (optional; built of the queue and rates).

The default composes the capabilities a store has already: a plain claim,
the grants (:func:`~chongming.stores.granted.admit_by_grants`), the release
of what was refused and one ``start_claimed`` of the rest, so every store
with a queue, rate limits and ``start_claimed`` has it. A backend may do it
in one transaction instead (PostgreSQL does: each task row is then written
once, and a refused one not at all).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from chongming.stores.ports.queue import QueueStore
from chongming.stores.ports.rates import RateLimitStore

if TYPE_CHECKING:  # these import stores.checks, which needs the records
    from chongming.stores.granted import GrantAsk, GrantedClaim
    from chongming.stores.queue import Serves
    from chongming.stores.rates import RateGrant

__all__ = ["GrantedClaimStore"]


class GrantedClaimStore(QueueStore, RateLimitStore, Protocol):
    """``claim_granted``: claim, take the grants, start what was granted."""

    async def claim_granted(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
        at: datetime,
        grants: GrantAsk,
    ) -> GrantedClaim:
        """:meth:`claim_started` for a claimer with rate limits: only what is granted starts.

        Of the tasks the claim takes (same filters and order as :meth:`claim`),
        those carrying a tag of ``grants.limited`` (by ``grants.tags_of``)
        need a grant of it (:mod:`chongming.stores.granted` says how they are
        asked for); what passes starts as :meth:`claim_started` starts it, the
        rest stays ``queued`` with no owner. The answer holds what started
        and each asked tag's decision (its ``retry_after`` says when to ask
        again). An unknown limit raises ``UnknownRateLimit``.
        """
        from chongming.stores.granted import GrantedClaim, admit_by_grants, check_grant_ask
        from chongming.stores.queue import check_claim

        ask = check_grant_ask(grants)
        check_claim(owner, serves, buckets, limit, exclude_tags, tags, age_step)
        claimed = await self.claim(
            owner,
            serves=serves,
            buckets=buckets,
            limit=limit,
            exclude_tags=exclude_tags,
            tags=tags,
            age_step=age_step,
        )

        async def take(tag: str, want: int) -> RateGrant:
            return await self.take_rate_grants(tag, want=want)

        try:
            passing, refused, decided = await admit_by_grants(
                claimed, lambda t: ask.tags_of(t.name, t.version, t.tags), ask.limited, take
            )
        except BaseException:
            passing, refused = [], claimed  # nothing starts: every claim goes back
            raise
        finally:
            for task in refused:
                await self.release_claim(task.task_id, owner, task.status_version)
        started = await self.start_claimed(owner, passing, at=at) if passing else []
        return GrantedClaim(started=started, grants=decided, refused=len(refused))
