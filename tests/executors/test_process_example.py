"""docs/examples/process_executor.py runs and prints what the executor chapter promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("process_executor.py")
def test_the_process_executor_example(example: Path) -> None:
    lines = run_example(example)
    assert_in_order(
        lines,
        [
            "== An unresponsive task, really stopped ==",
            "final status: stopped",
            "   running -> stopping  by user:stop  (release window)",
            "  stopping -> stopped   by runtime:stop_confirmed"
            "  (release window; killed after grace (it outlived SIGTERM))",
            "== A crash, contained ==",
            "final status : failed",
            "failure kind : crashed",
            "next task    : succeeded (value 5)",
            "== A lambda, refused at submit ==",
        ],
    )
    message = next(line for line in lines if line.startswith("message      : "))
    assert "was killed by signal SIGSEGV (11) while running the task" in message
    refusal = next(line for line in lines if line.startswith("refused: "))
    assert "a lambda has no name a worker process could import" in refusal
    assert "define it with def at the top level of a module" in refusal
