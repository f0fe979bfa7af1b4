"""The in-memory store's retention: the oracle the SQL backends' prunes are checked against."""

from __future__ import annotations

from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.retention import RetentionStore
from chongming.stores.retention import PruneSelection, check_batch, check_selection

__all__ = ["RetentionOnMemory"]


class RetentionOnMemory(MemoryState, RetentionStore):
    """Delete terminal tasks and every dict entry keyed by them (nothing is awaited)."""

    def _prunable(self, selection: PruneSelection) -> list[str]:
        # a parent stays while a child of its lives (the child's end is the parent's fact)
        raising = {
            parent
            for child, parent in self._parents.items()
            if (task := self._tasks.get(child)) is not None and not task.status.is_terminal
        }
        found = [
            (snapshot.finished_at, task_id)
            for task_id, snapshot in self._tasks.items()
            if task_id not in raising
            and selection.matches(
                status=snapshot.status,
                name=snapshot.name,
                task_id=task_id,
                finished_at=snapshot.finished_at,
            )
        ]
        return [task_id for _, task_id in sorted(found, key=lambda pair: (pair[0], pair[1]))]

    async def prune_tasks(self, selection: PruneSelection, *, limit: int) -> int:
        self._check_open()
        check_selection(selection)
        check_batch(limit, field="limit")
        doomed = set(self._prunable(selection)[:limit])
        for task_id in doomed:
            del self._tasks[task_id]
            self._history.pop(task_id, None)
            self._carriers.pop(task_id, None)
            self._runs.pop(task_id, None)
            self._steps.pop(task_id, None)
            self._facts.pop(task_id, None)
            self._parents.pop(task_id, None)
        for key in [key for key, (task_id, _) in self._keys.items() if task_id in doomed]:
            del self._keys[key]
        for effect in [effect for effect in self._effects if effect[0] in doomed]:
            del self._effects[effect]
        for command_id in [c.command_id for c in self._commands.values() if c.task_id in doomed]:
            del self._commands[command_id]
            self._outcomes.pop(command_id, None)
        return len(doomed)

    async def count_prunable(self, selection: PruneSelection) -> int:
        self._check_open()
        check_selection(selection)
        return len(self._prunable(selection))
