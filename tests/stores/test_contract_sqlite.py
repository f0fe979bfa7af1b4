"""The store contract against SQLite: a file in a temporary directory, and ``:memory:``."""

from __future__ import annotations

from pathlib import Path

import pytest

from chongming.stores.base import TaskStore
from chongming.stores.sqlite import SqliteTaskStore
from chongming.testing.store_contract import (
    ClusterLimitContract,
    EnqueueFactsContract,
    GrantedClaimContract,
    PoolClaimContract,
    RateLimitContract,
    RetentionContract,
    ScheduleContract,
    SpawnContract,
    StoreContract,
    TraceCarrierContract,
)


class TestSqliteFileContract(
    StoreContract,
    ClusterLimitContract,
    SpawnContract,
    TraceCarrierContract,
    EnqueueFactsContract,
    RateLimitContract,
    PoolClaimContract,
    GrantedClaimContract,
    RetentionContract,
    ScheduleContract,
):
    @pytest.fixture(autouse=True)
    def _directory(self, tmp_path: Path) -> None:
        self.directory = tmp_path

    async def make_store(self) -> TaskStore:
        return SqliteTaskStore(self.directory / "tasks.db")


class TestSqliteMemoryContract(
    StoreContract,
    ClusterLimitContract,
    SpawnContract,
    TraceCarrierContract,
    EnqueueFactsContract,
    RateLimitContract,
    PoolClaimContract,
    GrantedClaimContract,
    RetentionContract,
    ScheduleContract,
):
    async def make_store(self) -> TaskStore:
        return SqliteTaskStore(":memory:")
