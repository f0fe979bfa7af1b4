"""An interpreter whose process executor nobody closed exits promptly, taking its workers along.

multiprocessing's own exit hook joins every non-daemon child it started; a
worker waits for its next job as long as its pipe is open, so that join
would never return. The executor kills its workers (and their process
groups) first. Each case runs a real interpreter and bounds its exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.executors.conftest import alive, process_table

ROOT = Path(__file__).resolve().parents[2]

#: Seconds an interpreter may take to exit once its program is done (it takes well under 1).
EXIT_BOUND = 10.0

_PROGRAMS = {
    "executor": """
        async def main():
            executor = ProcessExecutor(max_workers=2, start_method={start_method!r})
            async with TaskRun(process_tasks.leave_a_sleeper, executor=executor) as run:
                return (await run.wait(60)).value
        """,
    "controller": """
        async def main():
            async with Controller(executor=ProcessExecutor(start_method={start_method!r})) as c:
                c.register("leave", process_tasks.leave_a_sleeper)
                return (await (await c.submit("leave")).wait(60)).value
        """,
}


def _script(tmp_path: Path, program: str) -> Path:
    script = tmp_path / "program.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, json, sys
            sys.path.insert(0, {str(ROOT)!r})
            from chongming import Controller, TaskRun
            from chongming.executors import ProcessExecutor
            from tests.executors import process_tasks
            """
        )
        + textwrap.dedent(program)
        + textwrap.dedent(
            """
            if __name__ == "__main__":
                print(json.dumps(asyncio.run(main())), flush=True)
            """
        )
    )
    return script


def _left_behind(pids: list[int]) -> list[str]:
    table = process_table()
    left = [f"process {pid}" for pid in pids if alive(pid)]
    for pid, (state, _, group, session) in sorted(table.items()):
        if state not in ("Z", "X") and (group in pids or session in pids):
            left.append(f"process {pid} in the group of worker {group}")
    return sorted(set(left))


def _still_there(pids: list[int]) -> list[str]:
    """What of ``pids`` (and their groups) lives on a while after exit (helpers take a moment)."""
    deadline = time.monotonic() + 5
    while _left_behind(pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _left_behind(pids)


def _run_to_exit(script: Path) -> tuple[int, list[int], float | None]:
    """Run ``script``: its pid, the pids it printed, how long it took to exit after printing them.

    The program gets a session of its own, so what it leaves in it is found too.
    """
    program = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    pids: list[int] = []
    try:
        assert program.stdout is not None
        line = program.stdout.readline()
        done = time.monotonic()
        pids = json.loads(line)
        try:
            program.wait(EXIT_BOUND)
        except subprocess.TimeoutExpired:
            return program.pid, pids, None
        return program.pid, pids, time.monotonic() - done
    finally:
        if program.poll() is None:
            os.killpg(program.pid, 9)
            program.wait(10)
        for pid in (pid for pid in pids if isinstance(pid, int) and pid > 0):  # its workers
            try:
                os.killpg(pid, 9)
            except OSError:
                pass
        if program.stdout is not None:
            program.stdout.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("program", "start_method"),
    [("executor", "spawn"), ("controller", "spawn"), ("executor", "forkserver")],
)
def test_an_unclosed_executor_does_not_hold_up_exit(
    tmp_path: Path, program: str, start_method: str
) -> None:
    script = _script(tmp_path, _PROGRAMS[program].format(start_method=start_method))
    session, pids, took = _run_to_exit(script)
    assert len(pids) == 2  # the worker, and the sleeper it left in its group
    assert took is not None, f"the interpreter had not exited {EXIT_BOUND:g} s after its program"
    assert _still_there([session, *pids]) == []


_FORK_AND_EXIT = """
    import atexit, os

    async def main():
        async with ProcessExecutor(max_workers=1) as executor:
            async with TaskRun(process_tasks.where, executor=executor) as run:
                before = (await run.wait(60)).value
            child = os.fork()
            if child == 0:  # exits as an interpreter does: every exit hook runs
                os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
                atexit._run_exitfuncs()
                os._exit(0)
            os.waitpid(child, 0)
            async with TaskRun(process_tasks.where, executor=executor) as run:
                after = (await run.wait(60)).value
            return [before, after, executor.statistics().exited]
    """


def test_a_forked_process_that_exits_leaves_the_workers_alone(tmp_path: Path) -> None:
    """The workers belong to the process that started them, not to a fork of it."""
    session, (before, after, exited), took = _run_to_exit(_script(tmp_path, _FORK_AND_EXIT))
    assert took is not None
    assert (after, exited) == (before, 0)  # the same worker served both calls
    assert _still_there([session, before]) == []
