"""Start-up cost of one-shot CLI commands on a store holding 10,000 tasks.

A query command runs the event loop once, opens the store, reads, prints and
exits, so its cost is mostly start-up: the interpreter, imports, the schema
check and the query. Each command runs ``--runs`` times as a fresh process;
the median is reported beside ``python -c pass`` and ``python -c "import
chongming"`` measured in the same run. Goal: ``chongming --db tasks.db ps``
under 0.5 s on the 2-core development machine.

    python benchmarks/bench_cli.py --n 10000 --runs 9
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_store import Trajectory, build_trajectories, drive_store

from chongming.stores.sqlite import SqliteTaskStore

#: One task in this many is left running (so ``ps`` without ``--all`` has rows).
UNFINISHED_EVERY = 10


async def populate(path: Path, n: int) -> None:
    trajectories = []
    for index, trajectory in enumerate(build_trajectories(n)):
        if index % UNFINISHED_EVERY == 0:  # queued -> starting -> running, no end
            trajectory = Trajectory(trajectory.snapshots[:4], trajectory.transitions[:3])
        trajectories.append(trajectory)
    async with SqliteTaskStore(path) as store:
        await drive_store("populate", store, trajectories, concurrency=200)


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    options = parser.parse_args()
    script = Path(sys.executable).parent / "chongming"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "chongming"]
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "tasks.db"
        asyncio.run(populate(db, options.n))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            'python -c "import chongming"': [sys.executable, "-c", "import chongming"],
            "chongming --help": [*cli, "--help"],
            f"chongming ps ({options.n // UNFINISHED_EVERY} rows)": [*cli, "--db", str(db), "ps"],
            "chongming ps --all --limit 100": [
                *cli,
                "--db",
                str(db),
                "ps",
                "--all",
                "--limit",
                "100",
            ],
            "chongming status ID": [*cli, "--db", str(db), "status", "bench-000001"],
            "chongming stats": [*cli, "--db", str(db), "stats"],
        }
        results = {
            name: median_seconds(command, options.runs) for name, command in commands.items()
        }
    baseline = results['python -c "import chongming"']
    print(f"CLI start-up, {options.n} tasks in the store, median of {options.runs} runs:")
    for name, seconds in results.items():
        print(
            f"  {name:<34} {seconds * 1000:7.0f} ms  ({seconds / baseline:4.1f}x import chongming)"
        )
    ps = next(seconds for name, seconds in results.items() if name.startswith("chongming ps ("))
    verdict = "meets" if ps < 0.5 else "misses"
    print(f"ratio: chongming ps = {ps * 1000:.0f} ms, {verdict} the 500 ms goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
