from __future__ import annotations

import pytest

from chongming import RetryPolicy, Timeout, task
from chongming.errors import ConfigurationError
from chongming.task_api.spec import SPEC_ATTRIBUTE, TaskSpec, spec_for


def test_decorator_attaches_a_spec_and_returns_the_function() -> None:
    @task(name="extract", tags={"io"}, retry=RetryPolicy(max_attempts=3), priority=5)
    async def extract(ctx: object, day: str) -> str:
        return day

    spec = getattr(extract, SPEC_ATTRIBUTE)
    assert isinstance(spec, TaskSpec)
    assert (spec.name, spec.tags, spec.priority, spec.is_coroutine) == (
        "extract",
        frozenset({"io"}),
        5,
        True,
    )
    assert spec.retry is not None
    assert spec.retry.max_attempts == 3
    assert spec_for(extract) is spec


def test_bare_decorator_uses_the_function_name() -> None:
    @task
    def crunch(ctx: object, n: int) -> int:
        return n

    assert spec_for(crunch).name == "crunch"
    assert not spec_for(crunch).is_coroutine
    assert crunch(None, 3) == 3  # still a plain function


def test_function_without_context_parameter_is_refused() -> None:
    def no_ctx() -> None:
        pass

    def kw_only(*, ctx: object) -> None:
        pass

    for fn in (no_ctx, kw_only):
        with pytest.raises(ConfigurationError, match="context parameter"):
            task(fn)


def test_arguments_are_checked_against_the_signature() -> None:
    def two(ctx: object, a: int, b: int = 0) -> None:
        pass

    spec = spec_for(two)
    spec.bind_check((1,), {})
    spec.bind_check((1, 2), {})
    with pytest.raises(ConfigurationError, match="arguments do not fit"):
        spec.bind_check((), {})
    with pytest.raises(ConfigurationError, match="arguments do not fit"):
        spec.bind_check((1,), {"c": 3})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tags": "io"},
        {"tags": {""}},
        {"retry": 3},
        {"timeout": 5},
        {"priority": "high"},
    ],
)
def test_bad_options(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        task(**kwargs)(lambda ctx: None)  # type: ignore[call-overload]


def test_executor_on_a_coroutine_is_refused() -> None:
    async def job(ctx: object) -> None:
        pass

    with pytest.raises(ConfigurationError, match="executor"):
        task(executor="thread")(job)


def test_no_import_time_registry() -> None:
    import chongming.task_api.spec as module

    assert not any(isinstance(v, dict) and v for k, v in vars(module).items() if k.isupper())
    _ = Timeout
