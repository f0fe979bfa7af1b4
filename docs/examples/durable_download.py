"""A durable download job killed mid-way and finished by a second worker.

Run it: ``python docs/examples/durable_download.py``. The job waits for the
fact "download finished" (sent by the downloader once the file is there),
copies the file in chunks (each a memoised step), and records the copy in a
business table of the same SQLite file through ``ctx.effect``. Worker A is
killed with SIGKILL in the middle of the copy; worker B resumes the task:
it replays the chunks A finished, copies the rest, and records the copy once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from chongming import Controller

HERE = Path(__file__).resolve().parent


def start_worker(db: Path, owner: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(HERE), "DOWNLOAD_CHUNK_SECONDS": "0.15"}
    command = [sys.executable, "-m", "chongming", "--db", str(db), "--owner", owner]
    command += ["worker", "--tasks", "download_tasks", "--lease-ttl", "1", "--grace", "1"]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def business_table(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS copies (op TEXT, path TEXT, bytes INTEGER)")


def copies(db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT op, bytes FROM copies").fetchall()


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        db, source, target = root / "tasks.db", root / "movie.bin", root / "copy.bin"
        source.write_bytes(os.urandom(20 * 64 * 1024))  # twenty chunks
        workers = [start_worker(db, "worker-a")]
        try:
            async with Controller(store=db, owner="downloader", poll_interval=0.05) as client:
                await asyncio.to_thread(workers[0].stdout.readline)  # type: ignore[union-attr]
                await asyncio.to_thread(business_table, db)
                queued = await client.enqueue("copy-download", str(target), task_id="dl-1")
                # The download finishes; the fact is persisted before anyone waits on it.
                await client.signal(
                    "dl-1", "download-finished", {"path": str(source), "bytes": 20 * 64 * 1024}
                )
                assert client.store is not None
                while len(await client.store.steps("dl-1")) < 6:  # a third of the way
                    await asyncio.sleep(0.02)
                workers[0].send_signal(signal.SIGKILL)
                await asyncio.to_thread(workers[0].wait)
                print("worker-a killed mid-copy")
                workers.append(start_worker(db, "worker-b"))
                final = await queued.wait(timeout=60)
                history = await client.history("dl-1")
                steps = await client.store.steps("dl-1")
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=30)
                if worker.stdout is not None:
                    worker.stdout.close()
        print(f"status {final.status.value} on {final.owner}, attempt {final.attempt}")
        for t in history:
            if t.trigger in ("reconcile:lease_expired", "reconcile:resumed"):
                print(f"  {t.from_status.value} -> {t.to_status.value} by {t.trigger}")
        chunks = [s for s in steps if s.name == "chunk"]
        by_a = sum(1 for s in chunks if s.epoch == 1)
        print(
            f"chunks: {len(chunks)} recorded, {by_a} by worker-a, {len(chunks) - by_a} by worker-b"
        )
        print(f"copy identical: {target.read_bytes() == source.read_bytes()}")
        print(f"business rows: {await asyncio.to_thread(copies, db)}")


if __name__ == "__main__":
    asyncio.run(main())
