"""The hot path builds two named tuples positionally (``tuple.__new__``, one call less).

``Attempt.drive`` builds the common success ``Verdict`` and ``RunState`` its
``AttemptInputs`` field by field in order: a field added or moved must fail
here, not as a wrong attribute on the hot path.
"""

from __future__ import annotations

from chongming.run.plan import AttemptInputs
from chongming.run.task_run import TaskRun
from chongming.run.verdict import Verdict


def test_the_fields_the_hot_path_builds_in_order() -> None:
    assert Verdict._fields == ("kind", "value", "failure", "error", "note")
    assert AttemptInputs._fields == ("task_id", "args", "kwargs", "upstream")


async def test_a_run_built_positionally_reads_back_its_inputs() -> None:
    async def add(ctx: object, a: int, *, b: int) -> int:
        return a + b

    run = TaskRun(add, (1,), {"b": 2}, task_id="positional")
    assert run.args == (1,)
    assert run.kwargs == {"b": 2}
    async with run:
        outcome = await run.wait(5)
    assert outcome.value == 3
