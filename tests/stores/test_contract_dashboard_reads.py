"""The dashboard's parts of the store contract (activity, search, journal) on every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from chongming.stores.base import TaskStore
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.sqlite import SqliteTaskStore
from chongming.testing.store_contract import ActivityContract, JournalContract, SearchContract
from tests.stores.pg_support import PgStoreFactory, require_postgres


class TestInMemoryActivity(ActivityContract, SearchContract, JournalContract):
    async def make_store(self) -> TaskStore:
        return InMemoryTaskStore()


class TestSqliteActivity(ActivityContract, SearchContract, JournalContract):
    @pytest.fixture(autouse=True)
    def _directory(self, tmp_path: Path) -> None:
        self.directory = tmp_path

    async def make_store(self) -> TaskStore:
        return SqliteTaskStore(self.directory / "tasks.db")


@pytest.mark.postgres
class TestPostgresActivity(ActivityContract, SearchContract, JournalContract):
    @pytest.fixture(autouse=True)
    def _postgres(self) -> None:
        self.factory = PgStoreFactory(require_postgres())

    async def make_store(self) -> TaskStore:
        store: TaskStore = self.factory.make()
        return store

    async def release_store(self, store: TaskStore) -> None:
        await super().release_store(store)
        await self.factory.cleanup()
