"""Every runnable example in docs/examples runs and prints what the docs promise.

Each example runs in its own interpreter, exactly as a reader would run it.
Only deterministic lines are compared: ids and timings are never asserted.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def run_example(path: Path) -> list[str]:
    name = path.name
    env = {**os.environ, "PYTHONWARNINGS": "error", "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
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


@pytest.mark.example("quickstart.py")
def test_quickstart_prints_the_seed_trajectory(example: Path) -> None:
    lines = run_example(example)
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


@pytest.mark.example("control.py")
def test_control_shows_pause_round_trip_stop_and_lost(example: Path) -> None:
    lines = run_example(example)
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


@pytest.mark.example("retry_and_timeout.py")
def test_retry_and_timeout_outcomes(example: Path) -> None:
    lines = run_example(example)
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


@pytest.mark.example("controller_queueing.py")
def test_controller_queueing_shows_two_running_two_queued(example: Path) -> None:
    lines = run_example(example)
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


@pytest.mark.example("buckets.py")
def test_buckets_shows_a_backlog_in_one_bucket_only(example: Path) -> None:
    lines = run_example(example)
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


@pytest.mark.example("sync_script.py")
def test_sync_script_runs_from_plain_threads(example: Path) -> None:
    lines = run_example(example)
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


@pytest.mark.example("cross_process.py")
def test_cross_process_ops_console_stops_a_workers_task(example: Path) -> None:
    lines = run_example(example)
    listed = [line.split() for line in lines if line.startswith("job-")]
    assert [(row[0], row[3]) for row in listed] == [("job-1", "running"), ("job-2", "running")]
    assert_in_order(
        lines,
        [
            "    task handles it holds: 0",
            ">>> ops-console stops job-1 across processes",
            "    request issued: True",
            "    worker-1 claimed the command and stopped the task",
            "worker-1: job-1 stopped, job-2 stopped",
        ],
    )
    history = [line.split() for line in lines if line.strip()[:1].isdigit()]
    assert [(row[1], row[3], row[5]) for row in history] == [
        ("pending", "queued", "orchestrator:dependencies_resolved"),
        ("queued", "starting", "scheduler:dispatch"),
        ("starting", "running", "executor:launched"),
        ("running", "stopping", "user:stop"),
        ("stopping", "stopped", "runtime:stop_confirmed"),
    ]
    assert history[3][6:] == ["release", "window"]  # B's reason, in A's task history


def marked_examples(path: Path) -> set[str]:
    """Examples named by ``pytest.mark.example(...)`` on the tests of one module.

    A mark counts on a ``test_*`` function, a ``Test*`` class (or a method in
    one), or in ``pytestmark`` when the module defines tests: deleting the test
    deletes its mark, so an example whose tests are gone is seen as unrun.
    """
    tree = ast.parse(path.read_text(), filename=str(path))

    def names_in(node: ast.AST) -> set[str]:
        found = set()
        for call in ast.walk(node):
            if (
                isinstance(call, ast.Call)
                and ast.unparse(call.func) == "pytest.mark.example"
                and call.args
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)
            ):
                found.add(call.args[0].value)
        return found

    def is_test(node: ast.AST) -> bool:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node.name.startswith("test")
        return isinstance(node, ast.ClassDef) and node.name.startswith("Test")

    tests = [node for node in tree.body if is_test(node)]
    marked: set[str] = set()
    for node in tests:
        for decorator in node.decorator_list:  # type: ignore[attr-defined]
            marked |= names_in(decorator)
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if is_test(member):
                    for decorator in member.decorator_list:  # type: ignore[attr-defined]
                        marked |= names_in(decorator)
    for statement in tree.body:
        if (
            isinstance(statement, ast.Assign)
            and any(
                isinstance(target, ast.Name) and target.id == "pytestmark"
                for target in statement.targets
            )
            and tests
        ):
            marked |= names_in(statement.value)
    return marked


def test_every_example_is_run_by_a_test() -> None:
    tests = sorted((ROOT / "tests").rglob("test_*.py"))
    run = {name: path for path in tests for name in marked_examples(path)}
    present = {path.name for path in EXAMPLES.glob("*.py")}
    assert sorted(set(run) - present) == [], "marks name examples that do not exist"
    assert sorted(present - set(run)) == [], "these examples are run by no test"


def test_the_coverage_check_sees_a_missing_test(tmp_path: Path) -> None:
    module = tmp_path / "test_sample.py"
    module.write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.example('a.py')\n"
        "@pytest.mark.example('b.py')\n"
        "def test_b(): ...\n"
        "class TestC:\n"
        "    @pytest.mark.example('c.py')\n"
        "    def test_c(self): ...\n"
        "@pytest.mark.example('gone.py')\n"
        "def helper(): ...\n"
    )
    assert marked_examples(module) == {"a.py", "b.py", "c.py"}
    module.write_text("import pytest\npytestmark = pytest.mark.example('a.py')\n")
    assert marked_examples(module) == set()  # a mark without a test runs nothing
