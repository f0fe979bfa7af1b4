from __future__ import annotations

import types

import pytest

from chongming import ConfigurationError, Controller, TaskRegistry, UnknownTask, task


async def job(ctx) -> int:  # type: ignore[no-untyped-def]
    return 1


def test_registering_a_name_twice_is_an_error() -> None:
    registry = TaskRegistry()
    registry.register("job", job)
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register("job", job)


@pytest.mark.parametrize("name", ["", " job", "job\n", "a\x00b", 42, "x" * 201])
def test_bad_names(name: object) -> None:
    with pytest.raises(ConfigurationError):
        TaskRegistry().register(name, job)  # type: ignore[arg-type]


def test_non_callables_and_functions_without_context_are_refused() -> None:
    registry = TaskRegistry()
    with pytest.raises(ConfigurationError, match="not callable"):
        registry.register("x", 42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="context parameter"):
        registry.register("y", lambda: None)
    assert len(registry) == 0


def test_options_override_the_decorator() -> None:
    @task(tags={"io"}, priority=3)
    def extract(ctx) -> None:  # type: ignore[no-untyped-def]
        pass

    registry = TaskRegistry()
    spec = registry.register("extract", extract, priority=7)
    assert (spec.name, spec.tags, spec.priority) == ("extract", frozenset({"io"}), 7)


def test_register_module_collects_task_functions_defined_there() -> None:
    module = types.ModuleType("my_tasks")

    @task(name="daily-extract")
    def extract(ctx) -> None:  # type: ignore[no-untyped-def]
        pass

    @task
    def load(ctx) -> None:  # type: ignore[no-untyped-def]
        pass

    def helper(ctx) -> None:  # type: ignore[no-untyped-def]
        pass

    for fn in (extract, load, helper):
        fn.__module__ = "my_tasks"
        setattr(module, fn.__name__, fn)
    imported = task(lambda ctx: None)
    imported.__module__ = "elsewhere"
    module.imported = imported  # type: ignore[attr-defined]
    controller = Controller()
    assert controller.register_module(module) == ["daily-extract", "load"]
    assert controller.registry.names == ("daily-extract", "load")


async def test_unknown_name_lists_what_is_registered() -> None:
    async with Controller() as controller:
        controller.register("extract", job)
        controller.register("load", job)
        with pytest.raises(UnknownTask) as caught:
            await controller.submit("exctract")
        assert "extract, load" in str(caught.value)
        assert isinstance(caught.value, LookupError)
        assert (await controller.stats()).total == 0
