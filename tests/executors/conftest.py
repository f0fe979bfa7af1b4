"""Process-executor tests fail when they leave a process behind.

After every test: ``multiprocessing.active_children()`` is empty, no process
descends from this one (apart from multiprocessing's own resource tracker
and fork server, which live as long as the interpreter), and no live process
is left in the session or process group of a worker the test started, which
is where a task's children stay after their worker was killed (they are then
children of init, not ours).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import AsyncIterator, Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from chongming.executors import ProcessExecutor

#: How long processes that are ending may take to disappear after a test.
PROCESS_GRACE = 3.0


def process_table() -> dict[int, tuple[str, int, int, int]]:
    """pid -> (state, ppid, process group, session) of every process, from /proc."""
    table: dict[int, tuple[str, int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # it ended while we looked
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan zombie waits for init only)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def descendants(table: dict[int, tuple[str, int, int, int]], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _helpers() -> set[int]:
    """multiprocessing's own long-lived helper processes (started once per interpreter)."""
    from multiprocessing import forkserver, resource_tracker

    pids = {
        getattr(getattr(resource_tracker, "_resource_tracker", None), "_pid", None),
        getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None),
    }
    return {pid for pid in pids if isinstance(pid, int)}


def leftovers(started: list[int]) -> list[str]:
    problems = [f"active child {child!r}" for child in multiprocessing.active_children()]
    table = process_table()
    helpers = _helpers()
    for pid in sorted(descendants(table, os.getpid()) - helpers):
        problems.append(f"descendant {pid} in state {table[pid][0]}")
    sessions = set(started)
    for pid, (state, _, group, session) in sorted(table.items()):
        if state not in ("Z", "X") and (group in sessions or session in sessions):
            problems.append(f"process {pid} left in the group of worker {group}")
    return sorted(set(problems))


@pytest.fixture(autouse=True)
def no_stray_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Record every worker the test starts; fail if anything of them outlives the test."""
    started: list[int] = []
    original = BaseProcess.start

    def recording_start(self: BaseProcess) -> None:
        original(self)
        if self.pid is not None:
            started.append(self.pid)

    monkeypatch.setattr(BaseProcess, "start", recording_start)
    yield started
    deadline = time.monotonic() + PROCESS_GRACE
    left = leftovers(started)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = leftovers(started)
    assert left == [], f"the test left processes behind: {left}"


@pytest.fixture
async def processes() -> AsyncIterator[ProcessExecutor]:
    """Two workers from the fork server: a crashed worker is replaced in milliseconds."""
    async with ProcessExecutor(max_workers=2, start_method="forkserver", grace=0.3) as executor:
        yield executor
