"""Group commit: concurrent writes share one transaction, each keeps its own result.

Callers enqueue a write (the argument list of the store's single write
statement) and await its result. A writer task takes everything queued so
far and runs it as one set-based statement — one round trip and one WAL
flush for the whole batch instead of one per call. While a batch runs, the
next one accumulates, so the batch size follows the load and a lone write
waits for nobody.

Ordering: writes are partitioned by task id over ``writers`` queues, each
served by one task, so the writes of one task run in the order they were
issued. Within a batch the writes are stably sorted by task id, which keeps
each task's order and gives every process the same row-lock order.

Isolation: the statement never raises on a conflict, so one caller's
VersionConflict cannot abort the others. If a batch fails anyway (a data
error, a deadlock), each write is re-run alone so the error reaches only its
own caller. A connection error is handed to every caller of the batch: the
store resolves each one by re-reading (the batch may have committed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from chongming.errors import StoreClosed
from chongming.stores.postgres.driver import is_connection_error

__all__ = ["GroupWriter", "WriteArgs", "WriteResult"]


class WriteArgs(NamedTuple):
    """One write: its mode, the expected version (save), the snapshot values, transitions.

    Immutable, and a named tuple rather than a frozen dataclass: one is built
    per write on the hot path, where a tuple costs a fraction of the setattrs.
    """

    mode: str
    key: str
    expect: int | None = None
    params: Sequence[Any] = ()
    transitions: Sequence[tuple[Any, ...]] = ()


class WriteResult(NamedTuple):
    """What the write statement reported for one write."""

    applied: bool
    current: int | None


@dataclasses.dataclass(slots=True)
class _Op:
    args: WriteArgs
    future: asyncio.Future[WriteResult]

    @property
    def key(self) -> str:
        return self.args.key


Execute = Callable[[list[WriteArgs]], Awaitable[list[WriteResult]]]


class GroupWriter:
    """Batches writes per partition; started on first use, drained by ``close``."""

    def __init__(self, execute: Execute, *, writers: int, max_batch: int) -> None:
        self._execute = execute
        self._writers = max(1, writers)
        self._max_batch = max(1, max_batch)
        self._queues: list[asyncio.Queue[_Op | None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.batches = 0
        self.writes = 0

    async def write(self, args: WriteArgs) -> WriteResult:
        """Run one write in the next batch of its partition.

        Cancellation: a write not yet started is dropped; one in flight may
        still commit (the caller re-reads if it must know).
        """
        if self._closing:
            raise StoreClosed("PostgresTaskStore")
        if not self._tasks:
            self._start()
        future: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        partition = zlib.crc32(args.key.encode("utf-8", "surrogatepass")) % self._writers
        self._queues[partition].put_nowait(_Op(args, future))
        return await future

    def enqueue(self, batch: Sequence[WriteArgs]) -> list[asyncio.Future[WriteResult]]:
        """Queue many writes at once (no task per write); await the futures in any order.

        They join the next batch of their partitions, with any other caller's
        writes. Cancellation is the caller's: a future it stops awaiting may
        still be written.
        """
        if self._closing:
            raise StoreClosed("PostgresTaskStore")
        if not self._tasks:
            self._start()
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[WriteResult]] = []
        writers = self._writers
        for args in batch:
            future: asyncio.Future[WriteResult] = loop.create_future()
            partition = zlib.crc32(args.key.encode("utf-8", "surrogatepass")) % writers
            self._queues[partition].put_nowait(_Op(args, future))
            futures.append(future)
        return futures

    async def close(self, grace: float) -> None:
        """Finish queued writes (up to ``grace`` seconds), then stop the writers."""
        self._closing = True
        tasks, self._tasks = self._tasks, []
        if not tasks:
            return
        for queue in self._queues:
            queue.put_nowait(None)
        try:
            _, pending = await asyncio.wait(tasks, timeout=grace)
        except asyncio.CancelledError:
            pending = {task for task in tasks if not task.done()}
            for task in pending:
                task.cancel()
            raise
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    def _start(self) -> None:
        self._queues = [asyncio.Queue() for _ in range(self._writers)]
        self._tasks = [
            asyncio.get_running_loop().create_task(
                self._serve(queue), name=f"chongming-pg-writer-{i}"
            )
            for i, queue in enumerate(self._queues)
        ]

    async def _serve(self, queue: asyncio.Queue[_Op | None]) -> None:
        stop = False
        while not stop:
            first = await queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            live = sorted((op for op in batch if not op.future.done()), key=lambda op: op.key)
            if not live:
                continue
            try:
                await self._run(live)
            except asyncio.CancelledError:
                for op in live:
                    if not op.future.done():
                        op.future.cancel()
                raise

    async def _run(self, batch: list[_Op]) -> None:
        self.batches += 1
        self.writes += len(batch)
        try:
            results = await self._execute([op.args for op in batch])
        except Exception as error:
            if len(batch) > 1 and not is_connection_error(error):
                for op in batch:
                    await self._run_alone(op)
                return
            for op in batch:
                _fail(op, error)
            return
        for op, result in zip(batch, results, strict=True):
            if not op.future.done():
                op.future.set_result(result)

    async def _run_alone(self, op: _Op) -> None:
        if op.future.done():
            return
        try:
            (result,) = await self._execute([op.args])
        except Exception as error:
            _fail(op, error)
        else:
            if not op.future.done():
                op.future.set_result(result)


def _fail(op: _Op, error: BaseException) -> None:
    if not op.future.done():
        op.future.set_exception(error)
