"""Operate a worker: its start-up line, /readyz, /metrics and redacted JSON logs.

Run it from the repository root (it needs ``pip install 'chongming[metrics]'``)::

    python docs/examples/worker_operations.py

It starts a real ``chongming worker`` process on a fresh SQLite file, with
this file as its task module, then plays the operator: reads the start-up
line, asks ``/readyz``, enqueues three tasks, scrapes ``/metrics`` with
``prometheus_client``'s parser, reads the task's log line (its API key
masked), and stops the worker with SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from chongming import Controller

HERE = Path(__file__).resolve().parent
API_KEY = "sk-live-1234567890"  # what a careless task logs


async def resize(ctx: Any, image: str) -> str:
    """A task that logs the URL it calls, key and all: the task logger masks it."""
    ctx.log("calling https://img.example.com/resize?api_key=%s&image=%s", API_KEY, image)
    return f"{image}@2x"


def register(controller: Controller) -> None:
    """What ``chongming worker --tasks worker_operations`` registers."""
    controller.register("resize", resize)


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def start_worker(db: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1])])}
    command = [sys.executable, "-m", "chongming", "--db", str(db), "--owner", "resizer-1"]
    command += ["worker", "--tasks", "worker_operations", "--max-parallel", "2"]
    command += ["--lease-ttl", "10", "--poll-interval", "0.1", "--log-format", "json"]
    command += ["--metrics-port", "0", "--health-port", "0"]  # 0: any free port
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


async def main() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "tasks.db"
        worker = start_worker(db)
        assert worker.stdout is not None
        try:
            started = json.loads(await asyncio.to_thread(worker.stdout.readline))
            settings = started["settings"]
            print(
                f"worker {settings['owner']} serves {settings['serves']}, "
                f"max_parallel {settings['max_parallel']}, lease_ttl {settings['lease_ttl']:g}s"
            )
            health = settings["health"].split()[0]  # "http://127.0.0.1:PORT (/livez, /readyz)"
            status, body = await asyncio.to_thread(get, f"{health}/readyz")
            print(f"readyz: {status} lease {json.loads(body)['lease']}")

            async with Controller(store=db, owner="web") as client:
                queued = [await client.enqueue("resize", f"cat-{n}.png") for n in range(3)]
                results = [(await task.wait(timeout=30)).result for task in queued]
            print(f"results: {results}")

            status, text = await asyncio.to_thread(get, settings["metrics"])
            wanted = {
                "chongming_worker_claims_total",
                "chongming_worker_ends_total",
                "chongming_worker_slots_free",
            }
            for family in text_string_to_metric_families(text.decode()):
                for sample in family.samples:
                    if sample.name in wanted and sample.labels.get("status", "succeeded") == (
                        "succeeded"
                    ):
                        print(f"metrics: {sample.name} {sample.value:g}")
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = await asyncio.to_thread(worker.communicate, timeout=30)
        print(f"worker exited {worker.returncode}: {json.loads(out.splitlines()[-1])['message']}")
        task_lines = [json.loads(line) for line in err.splitlines() if '"task_id"' in line]
        print(f"task log: {task_lines[0]['message']}")
        print(f"the key in any log line: {API_KEY in err + out}")


if __name__ == "__main__":
    asyncio.run(main())
