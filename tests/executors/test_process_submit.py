"""What a worker could not import is refused at submit, with the constraint and the fix.

Only a registered function's name and JSON arguments cross to a worker, so
the checks are about names: a lambda, a closure, a partial, a bound method,
a callable object, an unwrapped coroutine function, a function of a main
module that a worker cannot import, and any target while the main script
lacks its ``__main__`` guard. Nothing is queued and no worker starts.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, PayloadError, run_task, task
from chongming.executors import ProcessExecutor, in_child_loop
from tests.executors import process_tasks


@pytest.fixture
def executor() -> ProcessExecutor:
    return ProcessExecutor(max_workers=1)  # never runs anything here: nothing to close


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        (process_tasks.doubled, "a lambda has no name a worker process could import"),
        (process_tasks.make_closure(1), "defined inside another function"),
        (functools.partial(process_tasks.add, b=1), "a functools.partial cannot be sent"),
        (process_tasks.counter.bump, "not a method"),
        (process_tasks.counter, "not a Counter"),
        (process_tasks.async_count, "wrap it with in_child_loop"),
        (len, "not a builtin_function_or_method"),
    ],
)
def test_unimportable_targets_are_refused_with_the_reason(
    executor: ProcessExecutor, target: Callable[..., Any], reason: str
) -> None:
    with pytest.raises(ConfigurationError, match="cannot run on a ProcessExecutor") as caught:
        executor.check_target(target)
    assert reason in str(caught.value)


def test_module_level_functions_and_wrapped_coroutines_are_accepted(
    executor: ProcessExecutor,
) -> None:
    executor.check_target(process_tasks.add)
    executor.check_target(in_child_loop(process_tasks.async_count))


def test_a_name_that_leads_elsewhere_is_refused(executor: ProcessExecutor) -> None:
    def add(ctx: object, a: int, b: int) -> int:
        return a + b

    add.__qualname__ = "add"
    add.__module__ = process_tasks.__name__  # the module's `add` is another function
    with pytest.raises(ConfigurationError, match="names another object in its module"):
        executor.check_target(add)


@pytest.fixture
def fake_main(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A stand-in ``__main__`` module: tests give it a file (or none) and functions."""
    main = types.ModuleType("__main__")
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)
    return main


def _define_in(main: types.ModuleType, name: str) -> Callable[..., Any]:
    def fn(ctx: object) -> int:
        return 1

    fn.__module__ = "__main__"
    fn.__qualname__ = fn.__name__ = name
    setattr(main, name, fn)
    return fn


def test_a_main_script_without_its_guard_is_refused(
    executor: ProcessExecutor, fake_main: types.ModuleType, tmp_path: Path
) -> None:
    script = tmp_path / "app.py"
    script.write_text("import asyncio\nasyncio.run(main())\n")
    fake_main.__file__ = str(script)
    for target in (_define_in(fake_main, "in_main"), process_tasks.where):
        with pytest.raises(ConfigurationError, match='has no `if __name__ == "__main__":` guard'):
            executor.check_target(target)


def test_a_main_script_with_its_guard_is_accepted(
    executor: ProcessExecutor, fake_main: types.ModuleType, tmp_path: Path
) -> None:
    script = tmp_path / "app.py"
    script.write_text('if __name__ == "__main__" and True:\n    main()\n')
    fake_main.__file__ = str(script)
    executor.check_target(_define_in(fake_main, "guarded"))


def test_a_function_of_an_interactive_main_is_refused(
    executor: ProcessExecutor, fake_main: types.ModuleType
) -> None:
    with pytest.raises(ConfigurationError, match="a worker process cannot import"):
        executor.check_target(_define_in(fake_main, "typed_in"))
    executor.check_target(process_tasks.count)  # an interactive main re-runs nothing


async def test_the_controller_refuses_at_submit_and_keeps_nothing() -> None:
    executor = ProcessExecutor(max_workers=1)
    async with Controller(executor=executor) as controller:
        controller.register("closure", process_tasks.make_closure(2))
        controller.register("lambda", process_tasks.doubled, executor=executor)
        controller.register("add", process_tasks.add)
        for name in ("closure", "lambda"):
            with pytest.raises(ConfigurationError, match="cannot run on a ProcessExecutor"):
                await controller.submit(name, 1)
        with pytest.raises(PayloadError, match="argument 0"):
            await controller.submit("add", {1, 2}, 3)  # arguments cross as JSON only
        assert await controller.list_tasks() == []
    assert executor.statistics().started == 0
    await executor.aclose()


async def test_task_decorator_choice_is_checked_too() -> None:
    executor = ProcessExecutor(max_workers=1)

    @task(executor=executor)
    def nested(ctx: object) -> int:
        return 1

    with pytest.raises(ConfigurationError, match="defined inside another function"):
        await run_task(nested)
    assert executor.statistics().started == 0
