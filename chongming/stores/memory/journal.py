"""The in-memory store's journal details: the effects ledger; it keeps no times."""

from __future__ import annotations

from chongming.stores.journal import EffectEntry, JournalDetails
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.journal import JournalStore

__all__ = ["JournalOnMemory"]


class JournalOnMemory(MemoryState, JournalStore):
    async def journal_details(self, task_id: str) -> JournalDetails:
        self._check_open()
        effects = [
            EffectEntry(op_key=op_key, committed=done, result=result if done else None)
            for (owner, op_key), (done, result) in sorted(self._effects.items())
            if owner == task_id
        ]
        return JournalDetails(effects=effects)
