"""The command poller: control requests from other processes, claimed and applied here.

A command is a row in the store addressed to the node that holds the task.
The poller claims a batch with a lease, applies each through the same code
path as a local call, and completes it — or releases it, untouched, when
this node does not hold the task (its real holder will claim it). A
notification from the store only wakes the poller early (it is a hint); a
poll runs every ``poll_interval`` seconds regardless, so a lost
notification delays a command by at most one interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from chongming.background import BackgroundTask
from chongming.errors import StoreClosed, StoreError
from chongming.run.host import OwnedTasks
from chongming.stores.base import TaskStore
from chongming.stores.checks import MAX_OUTCOME_CHARS
from chongming.stores.nodes import Command

__all__ = ["CommandPoller"]

_log = logging.getLogger("chongming.control")

#: ``apply(command)`` returns the outcome text to record, or ``None`` when
#: this node does not hold the task (the command is then released).
Apply = Callable[[Command], Awaitable[str | None]]


class CommandPoller:
    """Claims and applies the commands addressed to ``owner``."""

    def __init__(
        self,
        store: TaskStore,
        *,
        owner: str,
        apply: Apply,
        poll_interval: float,
        lease_seconds: float,
        batch: int = 100,
    ) -> None:
        self._store = store
        self._owner = owner
        self._apply = apply
        self._poll_interval = poll_interval
        self._lease_seconds = lease_seconds
        self._batch = batch
        self._loop = BackgroundTask("chongming:commands")
        self._appliers = OwnedTasks()
        self.applied = 0
        self.released = 0

    @property
    def running(self) -> bool:
        return self._loop.running

    def start(self) -> None:
        self._loop.start(self._poll_forever)

    async def aclose(self, timeout: float) -> None:
        await self._loop.stop()
        await self._appliers.cancel_and_wait(timeout)

    async def poll_once(self) -> int:
        """Claim and apply one batch; how many commands it held."""
        commands = await self._store.claim_commands(
            self._owner, lease_seconds=self._lease_seconds, limit=self._batch
        )
        for command in commands:
            self._appliers.spawn(self._handle(command), name=f"chongming:command:{command.kind}")
        return len(commands)

    async def _poll_forever(self) -> None:
        while True:
            try:
                claimed = await self.poll_once()
            except StoreClosed:
                _log.error("the store was closed; commands are no longer polled")
                return
            except StoreError as error:
                _log.warning("could not poll commands: %s", error)
                claimed = 0
            if claimed >= self._batch:
                continue  # more may be waiting: drain before sleeping
            try:
                async with asyncio.timeout(self._poll_interval):
                    await self._store.wait_command_hint()
            except TimeoutError:
                pass
            except StoreClosed:
                return
            except StoreError:
                await asyncio.sleep(self._poll_interval)

    async def _handle(self, command: Command) -> None:
        try:
            outcome = await self._apply(command)
        except Exception:
            _log.exception("applying command %s failed", command.command_id)
            outcome = "error: the command could not be applied"
        try:
            if outcome is None:
                await self._store.release_command(command.command_id, self._owner)
                self.released += 1
            else:
                await self._store.complete_command(
                    command.command_id, self._owner, outcome=outcome[:MAX_OUTCOME_CHARS]
                )
                self.applied += 1
                _log.info("command %s %s: %s", command.kind, command.task_id, outcome)
        except StoreError as error:
            # The lease runs out and the command is claimed again: applying
            # stop, pause or resume twice is harmless (each checks the state).
            _log.warning("could not settle command %s: %s", command.command_id, error)
