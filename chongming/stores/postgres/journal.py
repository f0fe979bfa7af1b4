"""Journal details on PostgreSQL: three reads by the task's id."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from chongming.stores.journal import EffectEntry, JournalDetails
from chongming.stores.postgres.schema import quote_schema

__all__ = ["JournalMethods"]


class JournalMethods:
    """The store port's journal-details method."""

    _schema: str

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    async def journal_details(self, task_id: str) -> JournalDetails:
        schema = quote_schema(self._schema)
        steps_sql = (
            f"SELECT name, occurrence, recorded_at FROM {schema}.durable_steps WHERE task_id = $1"
        )
        facts_sql = f"SELECT name, sent_at FROM {schema}.durable_facts WHERE task_id = $1"
        effects_sql = (
            "SELECT op_key, state, result::text AS result, epoch, started_at, done_at"
            f" FROM {schema}.durable_effects WHERE task_id = $1 ORDER BY started_at, op_key"
        )

        async def read(conn: Any) -> JournalDetails:
            steps = await conn.fetch(steps_sql, task_id)
            facts = await conn.fetch(facts_sql, task_id)
            effects = await conn.fetch(effects_sql, task_id)
            return JournalDetails(
                step_times={(r["name"], r["occurrence"]): r["recorded_at"] for r in steps},
                fact_times={r["name"]: r["sent_at"] for r in facts},
                effects=[
                    EffectEntry(
                        op_key=r["op_key"],
                        committed=r["state"] == "done",
                        result=None if r["result"] is None else json.loads(r["result"]),
                        epoch=r["epoch"],
                        started_at=r["started_at"],
                        done_at=r["done_at"],
                    )
                    for r in effects
                ],
            )

        details: JournalDetails = await self._read(f"reading the journal of {task_id!r}", read)
        return details
