"""``make demo``: the CLI demo script and its task module, run as a reader would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.example("cli_demo.py")
def test_the_demo_runs_the_job_then_shows_what_the_store_holds(
    example: Path, tmp_path: Path
) -> None:
    db = tmp_path / "demo" / "chongming.db"
    env = {k: v for k, v in os.environ.items() if k != "CHONGMING_DB"}
    result = subprocess.run(
        [sys.executable, str(example), str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**env, "PYTHONWARNINGS": "error", "PYTHONIOENCODING": "utf-8"},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert_in_order(
        lines,
        [
            f"$ chongming --db {db} tasks --tasks demo_tasks",
            f"$ chongming --db {db} run --tasks demo_tasks nightly-sync --arg tenant=A "
            "--task-id demo-1",
            f"$ chongming --db {db} ps --all",
            f"$ chongming --db {db} history demo-1",
            f"$ chongming --db {db} stats",
        ],
    )
    sections = _sections(lines)
    ran = "\n".join(sections["run"][0])
    assert "demo-1 succeeded after " in ran
    assert '; result: {"tenant": "A", "rows": 21000}' in ran
    assert "demo-2 failed after " in "\n".join(sections["run"][1])
    ps_rows = [line.split() for line in sections["ps"][0][2:-1]]
    assert [row[:3] for row in ps_rows] == [
        ["demo-1", "nightly-sync", "succeeded"],
        ["demo-2", "外部接口", "failed"],
    ]
    history = [line.split() for line in sections["history"][0][2:]]
    assert [(row[1], row[2]) for row in history] == [
        ("pending", "queued"),
        ("queued", "starting"),
        ("starting", "running"),
        ("running", "succeeded"),
    ]
    stats = [line.split() for line in sections["stats"][0]]
    assert ["failed", "1"] in stats
    assert ["succeeded", "1"] in stats


def _sections(lines: list[str]) -> dict[str, list[list[str]]]:
    """Each command's output lines, by command name, in the order they ran."""
    sections: dict[str, list[list[str]]] = {}
    current: list[str] = []
    for line in lines:
        if line.startswith("$ chongming "):
            current = []
            sections.setdefault(line.split()[4], []).append(current)
        elif line:
            current.append(line)
    return sections


@pytest.mark.example("demo_tasks.py")
def test_the_demo_task_module_registers_its_tasks(example: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(example.parent)}
    env.pop("CHONGMING_DB", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "chongming", "--db", str(tmp_path / "t.db"), *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env=env,
            check=False,
        )

    listed = json.loads(cli("tasks", "--tasks", "demo_tasks", "--json").stdout)
    assert [task["name"] for task in listed["tasks"]] == ["broken", "endless", "nightly-sync"]
    ran = cli(
        "run",
        "--tasks",
        "demo_tasks",
        "nightly-sync",
        "--arg",
        "tenant=B",
        "--json-args",
        '{"step_seconds": 0.01}',
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    task = json.loads(ran.stdout)["task"]
    assert task["result"] == {"tenant": "B", "rows": 21000}
    assert task["progress"]["message"] == "B: done"
