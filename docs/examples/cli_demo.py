"""The main job on the embedded SQLite default, through the ``chongming`` command line.

``make demo`` runs this script. It runs ``nightly-sync`` from the task module
``demo_tasks.py`` in the foreground (a live progress line on a terminal,
plain lines otherwise), then shows what the store recorded: ``ps --all``,
the task's ``history`` and ``stats``. Each step is a real ``chongming``
process on one SQLite file, the way a user would type them::

    export PYTHONPATH=docs/examples
    chongming --db demo.db run --tasks demo_tasks nightly-sync --arg tenant=A
    chongming --db demo.db ps --all
    chongming --db demo.db history demo-1
    chongming --db demo.db stats

Run it with ``python docs/examples/cli_demo.py [DB_PATH]`` (default
``.demo/chongming.db``, recreated on every run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def chongming(db: Path, *args: str) -> int:
    command = [sys.executable, "-m", "chongming", "--db", str(db), *args]
    print(f"\n$ chongming --db {db} {' '.join(args)}", flush=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parents[1])]))
    return subprocess.run(command, env=env, check=False).returncode


def main() -> int:
    db = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".demo") / "chongming.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    run = ("run", "--tasks", "demo_tasks")
    steps: list[tuple[int, tuple[str, ...]]] = [
        (0, ("tasks", "--tasks", "demo_tasks")),
        (0, (*run, "nightly-sync", "--arg", "tenant=A", "--task-id", "demo-1")),
        # broken fails on purpose: exit code 3 says "the task did not succeed"
        (3, (*run, "broken", "--task-id", "demo-2", "--label", "外部接口")),
        (0, ("ps", "--all")),
        (0, ("history", "demo-1")),
        (0, ("stats",)),
    ]
    for wanted, step in steps:
        code = chongming(db, *step)
        if code != wanted:
            print(f"demo: 'chongming {step[0]}' exited {code}, expected {wanted}", file=sys.stderr)
            return 1
    print(f"\nThe store is {db}: try 'chongming --db {db} status demo-1'.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
