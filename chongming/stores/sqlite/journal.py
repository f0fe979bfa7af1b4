"""Journal details on SQLite: three reads by the task's id on the reader connection."""

from __future__ import annotations

import json

from chongming.stores.journal import EffectEntry, JournalDetails
from chongming.stores.ports.journal import JournalStore
from chongming.stores.sqlite.internals import SqliteInternals
from chongming.stores.sqlite.rows import from_micros

__all__ = ["JournalOnSqlite"]

_STEPS = "SELECT name, occurrence, recorded_at FROM durable_steps WHERE task_id = ?"
_FACTS = "SELECT name, sent_at FROM durable_facts WHERE task_id = ?"
_EFFECTS = (
    "SELECT op_key, state, result, epoch, started_at, done_at FROM durable_effects"
    " WHERE task_id = ? ORDER BY started_at, op_key"
)


class JournalOnSqlite(SqliteInternals, JournalStore):
    async def journal_details(self, task_id: str) -> JournalDetails:
        steps = await self._read(_STEPS, (task_id,))
        facts = await self._read(_FACTS, (task_id,))
        effects = await self._read(_EFFECTS, (task_id,))
        return JournalDetails(
            step_times={(name, int(n)): from_micros(at) for name, n, at in steps},
            fact_times={name: from_micros(at) for name, at in facts},
            effects=[
                EffectEntry(
                    op_key=op_key,
                    committed=state == "done",
                    result=None if result is None else json.loads(result),
                    epoch=int(epoch),
                    started_at=from_micros(started),
                    done_at=None if done is None else from_micros(done),
                )
                for op_key, state, result, epoch, started, done in effects
            ],
        )
