"""Cluster-wide rate limits: start grants decided by the store, one atomic decision each.

Optional for a third-party store: mix :class:`RateLimitContract` into a
contract subclass only if the backend implements ``take_rate_grants``.
The limits used are slow (per minute) wherever the test must not see time
pass, so a real clock (SQLite, PostgreSQL) cannot hand out a grant the test
does not expect.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from chongming.errors import PayloadError, UnknownRateLimit
from chongming.stores.rates import RateLimit
from chongming.testing.store_contract._support import ContractBase, _raises

__all__ = ["RateLimitContract"]

_MINUTE = timedelta(minutes=1)


class RateLimitContract(ContractBase):
    async def test_declare_creates_once_and_the_stored_limit_wins(self) -> None:
        async with self._store() as store:
            assert await store.rate_limits() == {}
            first = RateLimit(rate=10)
            assert await store.declare_rate_limit("api", first) == first
            assert await store.declare_rate_limit("api", RateLimit(rate=99)) == first
            changed = RateLimit(rate=600, per=_MINUTE, burst=20)
            await store.set_rate_limit("api", changed)
            assert await store.declare_rate_limit("api", first) == changed
            await store.set_rate_limit("db", RateLimit(rate=3, per=timedelta(hours=1)))
            assert await store.rate_limits() == {
                "api": changed,
                "db": RateLimit(rate=3, per=timedelta(hours=1)),
            }

    async def test_a_burst_goes_at_once_then_the_next_grant_waits_an_interval(self) -> None:
        async with self._store() as store:
            await store.declare_rate_limit("api", RateLimit(rate=1, per=_MINUTE, burst=3))
            grant = await store.take_rate_grants("api", want=5)
            assert grant.granted == 3  # the burst, never the 5 asked for
            assert 50.0 < grant.retry_after <= 60.0  # then one per minute
            again = await store.take_rate_grants("api")
            assert again.granted == 0
            assert 50.0 < again.retry_after <= 60.0

    async def test_keys_of_one_limit_are_limited_apart(self) -> None:
        async with self._store() as store:
            await store.declare_rate_limit("api", RateLimit(rate=1, per=_MINUTE))
            assert (await store.take_rate_grants("api", key="tenant-a")).granted == 1
            assert (await store.take_rate_grants("api", key="tenant-a")).granted == 0
            assert (await store.take_rate_grants("api", key="tenant-b")).granted == 1
            assert (await store.take_rate_grants("api")).granted == 1  # the shared key

    async def test_many_callers_racing_get_exactly_the_burst(self) -> None:
        async with self._store() as store:
            await store.declare_rate_limit("api", RateLimit(rate=1, per=_MINUTE, burst=3))
            grants = await asyncio.gather(*(store.take_rate_grants("api") for _ in range(8)))
            assert sorted(grant.granted for grant in grants) == [0] * 5 + [1] * 3

    async def test_grants_come_back_as_time_passes(self) -> None:
        async with self._store() as store:
            await store.declare_rate_limit("api", RateLimit(rate=10))  # one per 0.1 s
            assert (await store.take_rate_grants("api")).granted == 1
            denied = await store.take_rate_grants("api", want=3)
            if denied.granted == 0:  # a slow real clock may already have let one through
                assert 0.0 < denied.retry_after <= 0.1
            await self.advance_clock(0.1)

            async def granted() -> bool:
                return (await store.take_rate_grants("api")).granted == 1

            assert await self._eventually(granted, "the next grant of 10/s")

    async def test_a_changed_limit_holds_from_the_next_decision(self) -> None:
        async with self._store() as store:
            await store.declare_rate_limit("api", RateLimit(rate=1, per=_MINUTE))
            assert (await store.take_rate_grants("api")).granted == 1
            assert (await store.take_rate_grants("api")).granted == 0
            await store.set_rate_limit("api", RateLimit(rate=1, per=_MINUTE, burst=3))
            # The minute the first grant used stays used: two more of the burst remain.
            assert (await store.take_rate_grants("api", want=5)).granted == 2

    async def test_unknown_limits_and_bad_input_are_refused_and_write_nothing(self) -> None:
        async with self._store() as store:
            await _raises(UnknownRateLimit, store.take_rate_grants("api"))
            for name in ("", "a\x00b", "x" * 10_000, "\u202e\n", 7):
                await _raises(PayloadError, store.declare_rate_limit(name, RateLimit(rate=1)))  # type: ignore[arg-type]
                await _raises(PayloadError, store.set_rate_limit(name, RateLimit(rate=1)))  # type: ignore[arg-type]
            for limit in ("10/s", 10, None):
                await _raises(PayloadError, store.declare_rate_limit("api", limit))  # type: ignore[arg-type]
            assert await store.rate_limits() == {}
            await store.declare_rate_limit("api", RateLimit(rate=1, per=_MINUTE))
            for want in (0, -1, True, 1.5, 10**9):
                await _raises(PayloadError, store.take_rate_grants("api", want=want))  # type: ignore[arg-type]
            for key in ("a\x00b", "x" * 10_000, 7):
                await _raises(PayloadError, store.take_rate_grants("api", key=key))  # type: ignore[arg-type]
            assert (await store.take_rate_grants("api")).granted == 1  # nothing was used up
