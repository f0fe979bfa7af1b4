"""Bad settings for a ProcessExecutor are refused at construction, naming the field."""

from __future__ import annotations

import math

import pytest

from chongming import ConfigurationError
from chongming.executors import ProcessExecutor, StopSemantics, in_child_loop
from chongming.task_api.signals import CarrierKind
from tests.executors import process_tasks


@pytest.mark.parametrize("max_workers", [0, -1, True, 2.5, "2"])
def test_max_workers_must_be_a_positive_int(max_workers: object) -> None:
    with pytest.raises(ConfigurationError, match=r"ProcessExecutor\.max_workers"):
        ProcessExecutor(max_workers=max_workers)  # type: ignore[arg-type]


def test_fork_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigurationError, match=r"'fork' is refused.*use 'spawn' or 'forkserver'"):
        ProcessExecutor(start_method="fork")


@pytest.mark.parametrize("start_method", ["thread", "", "SPAWN", 3, None])
def test_unknown_start_methods_are_refused(start_method: object) -> None:
    with pytest.raises(ConfigurationError, match="start_method must be 'spawn' or 'forkserver'"):
        ProcessExecutor(start_method=start_method)  # type: ignore[arg-type]


@pytest.mark.parametrize("grace", [-0.1, math.nan, math.inf, True, "1", None])
def test_grace_must_be_a_finite_number_of_seconds(grace: object) -> None:
    with pytest.raises(ConfigurationError, match=r"ProcessExecutor\.grace"):
        ProcessExecutor(grace=grace)  # type: ignore[arg-type]


def test_defaults_and_what_the_runtime_reads() -> None:
    executor = ProcessExecutor()
    assert executor.max_workers >= 1
    assert executor.start_method == "spawn"
    assert executor.grace == 0.5
    assert executor.stop_semantics is StopSemantics.KILL
    assert executor.carrier is CarrierKind.PROCESS
    assert repr(ProcessExecutor(2, start_method="forkserver", grace=0)) == (
        "ProcessExecutor(max_workers=2, start_method='forkserver', grace=0)"
    )
    stats = executor.statistics()
    assert (stats.workers, stats.started, stats.exited) == (0, 0, 0)  # nothing starts early


def test_in_child_loop_takes_only_coroutine_functions() -> None:
    with pytest.raises(ConfigurationError, match="takes an async def function"):
        in_child_loop(process_tasks.add)
    wrapped = in_child_loop(process_tasks.async_count)
    assert wrapped.__qualname__ == "async_count"
    with pytest.raises(ConfigurationError, match="runs only on a ProcessExecutor"):
        wrapped(None, 1)
