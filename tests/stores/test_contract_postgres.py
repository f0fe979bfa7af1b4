"""The store contract against PostgreSQL: one fresh schema per test, leak-checked."""

from __future__ import annotations

import pytest

from chongming.stores.base import TaskStore
from chongming.testing.store_contract import (
    ChildContract,
    ClusterLimitContract,
    EnqueueFactsContract,
    GrantedClaimContract,
    PoolClaimContract,
    RateLimitContract,
    RetentionContract,
    ScheduleContract,
    StoreContract,
    TraceCarrierContract,
)
from tests.stores.pg_support import PgStoreFactory, require_postgres

pytestmark = pytest.mark.postgres


class TestPostgresContract(
    StoreContract,
    ClusterLimitContract,
    ChildContract,
    TraceCarrierContract,
    EnqueueFactsContract,
    RateLimitContract,
    PoolClaimContract,
    GrantedClaimContract,
    RetentionContract,
    ScheduleContract,
):
    """Real clock (the server's): short leases still expire within the wait bound."""

    lease_seconds = 0.3
    wait_timeout = 10.0

    @pytest.fixture(autouse=True)
    def _postgres(self) -> None:
        self.factory = PgStoreFactory(require_postgres())

    async def make_store(self) -> TaskStore:
        store: TaskStore = self.factory.make()
        return store

    async def release_store(self, store: TaskStore) -> None:
        await super().release_store(store)
        await self.factory.cleanup()


class TestPostgresContractWithoutGroupCommit(TestPostgresContract):
    """The same contract with every write in its own statement (group_commit=False)."""

    async def make_store(self) -> TaskStore:
        store: TaskStore = self.factory.make(group_commit=False)
        return store
