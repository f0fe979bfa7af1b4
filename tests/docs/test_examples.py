"""Every runnable example in docs/examples runs and prints what the docs promise.

Each example runs in its own interpreter, exactly as a reader would run it.
Only deterministic lines are compared: ids and timings are never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def run_example(name: str) -> list[str]:
    env = {**os.environ, "PYTHONWARNINGS": "error", "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=EXAMPLES.parent.parent,
        check=False,
    )
    assert result.returncode == 0, f"{name} exited {result.returncode}:\n{result.stderr}"
    assert result.stderr == "", f"{name} wrote to stderr:\n{result.stderr}"
    return result.stdout.splitlines()


def assert_in_order(lines: list[str], expected: list[str]) -> None:
    """``expected`` lines appear in ``lines`` in this order (others may sit between)."""
    position = 0
    for wanted in expected:
        try:
            position = lines.index(wanted, position) + 1
        except ValueError:
            shown = "\n".join(lines)
            pytest.fail(f"missing or out of order: {wanted!r}\n--- output ---\n{shown}")


def table_rows(lines: list[str]) -> list[list[str]]:
    """Rows of the history table(s): lines that start with a version number."""
    rows = []
    for line in lines:
        cells = line.split(None, 6)
        if cells and cells[0].isdigit() and len(cells) >= 6:
            rows.append(cells)
    return rows


def test_quickstart_prints_the_seed_trajectory() -> None:
    lines = run_example("quickstart.py")
    assert_in_order(
        lines,
        [
            "  extracted s3://demo/rows -> 5 rows",
            "State history (append-only, auditable):",
            "   pending -> queued     by orchestrator:dependencies_resolved",
            "    queued -> starting   by scheduler:dispatch",
            "  starting -> running    by executor:launched",
            "   running -> succeeded  by executor:completed",
            "final status: succeeded",
            "value       : [0, 1, 2, 3, 4]",
        ],
    )
    assert sum(" -> " in line and " by " in line for line in lines) == 4
    assert any(line.startswith("elapsed     : ") and line.endswith("s") for line in lines)


def test_control_shows_pause_round_trip_stop_and_lost() -> None:
    lines = run_example("control.py")
    rows = table_rows(lines)
    assert rows == [
        ["1", "pending", "queued", "0", "orchestrator:dependencies_resolved", "system", "-"],
        ["2", "queued", "starting", "1", "scheduler:dispatch", "system", "-"],
        ["3", "starting", "running", "1", "executor:launched", "system", "-"],
        ["4", "running", "pausing", "1", "user:pause", "user", "-"],
        ["5", "pausing", "paused", "1", "runtime:pause_reached", "system", "-"],
        ["6", "paused", "running", "1", "user:resume", "user", "-"],
        ["7", "running", "stopping", "1", "user:stop", "alice", "release window"],
        ["8", "stopping", "stopped", "1", "runtime:stop_confirmed", "system", "release window"],
    ]
    assert_in_order(
        lines,
        [
            "== Pause round trip, then a stop with an actor and a reason ==",
            "pause()  -> True, status paused",
            "resume() -> True, status running",
            "stop()   -> True, status stopping",
            "final status: stopped",
            "VER  FROM      TO        ATTEMPT  TRIGGER                             ACTOR   REASON",
            "== wait(timeout) and a pause that is not reached ==",
            "wait(timeout=0.1) -> TimeoutError; the task is still running",
            "pause() -> False; status rolled back to running",
            "last transition: pausing -> running by runtime:pause_not_reached",
            "final status: succeeded (value 'copied')",
            "== A task that cannot be stopped: reported truthfully ==",
            "final status : lost",
            "failure kind : lost",
            "last transition: stopping -> lost by runtime:stop_abandoned",
        ],
    )
    assert any(line.startswith("meaning      : a thread cannot be killed") for line in lines)


def test_retry_and_timeout_outcomes() -> None:
    lines = run_example("retry_and_timeout.py")
    assert_in_order(
        lines,
        [
            "== Retry: succeeds after two failures ==",
            "  final status : succeeded",
            "  value        : succeeded on attempt 3",
            "  attempts     : 3/5",
            "== Retry: budget exhausted ==",
            "  final status : failed",
            "  attempts     : 2/2",
            "  failure kind : exception",
            "  message      : ValueError: malformed input row 17",
            "== Timeout: at most 0.5 s per attempt ==",
            "  final status : failed",
            "  failure kind : timeout_attempt",
            "  retryable    : True",
        ],
    )


def test_controller_queueing_shows_two_running_two_queued() -> None:
    lines = run_example("controller_queueing.py")
    rows = [line.split() for line in lines if line.startswith("t") and "转换" in line]
    assert [(row[0], row[2]) for row in rows] == [
        ("t0", "running"),
        ("t1", "running"),
        ("t2", "queued"),
        ("t3", "queued"),
    ]
    assert [row[4] for row in rows[2:]] == ["-", "-"]  # queued: never ran, no elapsed
    assert_in_order(
        lines,
        [
            "    active 4 (queued 2, holding a slot 2)",
            "stop t0 -> request issued: True",
            "t0  stopped    value=None",
            "t1  succeeded  value=200",
            "t2  succeeded  value=300",
            "t3  succeeded  value=400",
            "by status: {'stopped': 1, 'succeeded': 3}",
        ],
    )


def test_buckets_shows_a_backlog_in_one_bucket_only() -> None:
    lines = run_example("buckets.py")
    assert_in_order(
        lines,
        [
            "  tenant-A   -> bucket 7",
            "  tenant-B   -> bucket 28",
            "    active 6 (queued 4, holding a slot 2)",
            "holding a slot per bucket: {7: 1, 28: 1}",
            "all done: {'succeeded': 6}",
        ],
    )
    rows = [line.split() for line in lines if line[:2] in ("a0", "a1", "a2", "a3", "b0", "b1")]
    assert [(row[0], row[2], row[3]) for row in rows] == [
        ("a0", "7", "running"),
        ("a1", "7", "queued"),
        ("a2", "7", "queued"),
        ("a3", "7", "queued"),
        ("b0", "28", "running"),
        ("b1", "28", "queued"),
    ]


def test_sync_script_runs_from_plain_threads() -> None:
    lines = run_example("sync_script.py")
    assert_in_order(
        lines,
        [
            "img-0: succeeded -> img-0.png resized",
            "img-1: succeeded -> img-1.png resized",
            "img-2: succeeded -> img-2.png resized",
            "img-3: succeeded -> img-3.png resized",
            "    active 0 (queued 0, holding a slot 0)",
            "stop of a finished task issued: False",
        ],
    )


#: Examples tested elsewhere (they need a server or a store fixture).
TESTED_ELSEWHERE = {
    "fastapi_app.py": "tests/embedding/test_fastapi.py",
    "aiohttp_app.py": "tests/embedding/test_aiohttp.py",
    "third_party_store.py": "tests/test_docs_examples_stores.py",
}


def test_every_example_is_covered() -> None:
    covered = {
        "quickstart.py",
        "control.py",
        "retry_and_timeout.py",
        "controller_queueing.py",
        "buckets.py",
        "sync_script.py",
        *TESTED_ELSEWHERE,
    }
    present = {path.name for path in EXAMPLES.glob("*.py")}
    root = EXAMPLES.parent.parent
    missing = [
        test
        for name, test in TESTED_ELSEWHERE.items()
        if name in present and not (root / test).exists()
    ]
    assert missing == [], f"tests named for examples do not exist: {missing}"
    assert present <= covered, f"add a test for these examples: {sorted(present - covered)}"
