"""The ``@task`` decorator: a spec attached to a function, nothing global."""

from __future__ import annotations

import dataclasses
import inspect
import weakref
from collections.abc import Callable, Collection
from typing import Any, Literal, TypeVar, overload

from chongming.errors import ConfigurationError, ScheduleInvalid
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.state.durable_names import MAX_RESUMES
from chongming.state.payload import valid_version

__all__ = [
    "SPEC_ATTRIBUTE",
    "ExecutorChoice",
    "TaskSpec",
    "durable_needs_store",
    "spec_for",
    "task",
]

SPEC_ATTRIBUTE = "__chongming_task__"

#: Which executor runs a sync function: a name or an executor instance.
ExecutorChoice = Literal["thread", "inline", "process"] | Any

F = TypeVar("F", bound=Callable[..., Any])

#: Resumes of a durable task whose workers keep dying, before it fails.
DEFAULT_MAX_RESUMES = 3


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """Everything the runtime needs to know about a task function."""

    fn: Callable[..., Any]
    name: str
    tags: frozenset[str] = frozenset()
    retry: RetryPolicy | None = None
    timeout: Timeout | None = None
    executor: ExecutorChoice | None = None
    priority: int = 0
    #: The registered version (``name@version``); ``None``: unversioned.
    version: int | None = None
    #: Durable: steps memoised in the store, resumed elsewhere when its worker dies.
    durable: bool = False
    #: How many times a durable task's dead attempts are resumed before it fails.
    max_resumes: int = DEFAULT_MAX_RESUMES
    is_coroutine: bool = False
    #: A cron expression the task is enqueued on (``@task(schedule=...)``; docs/schedules.md).
    schedule: str | None = None
    #: The IANA zone ``schedule`` is read in (``None``: UTC).
    timezone: str | None = None
    signature: inspect.Signature | None = dataclasses.field(default=None, compare=False)
    # Argument shapes (count of positionals, keyword names) already known to bind.
    _fitting_shapes: set[tuple[int, tuple[str, ...]]] = dataclasses.field(
        default_factory=set, compare=False, repr=False
    )

    def bind_check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Fail now, with the reason, if the arguments cannot be passed to the function."""
        if self.signature is None:
            return
        shape = (len(args), tuple(kwargs))
        if shape in self._fitting_shapes:
            return
        try:
            self.signature.bind(None, *args, **kwargs)
        except TypeError as error:
            raise ConfigurationError(
                f"arguments do not fit task {self.name!r}{self.signature}: {error}"
            ) from None
        if len(self._fitting_shapes) < 64:
            self._fitting_shapes.add(shape)


def _check_schedule(schedule: str | None, timezone: str | None) -> None:
    """``@task(schedule=, timezone=)``: the cadence checks, naming ``schedule`` for the cron."""
    # Here, not at the top: cron and zone parsing cost 7 ms of every import otherwise.
    from chongming.schedules.cadence import make_cadence

    try:
        make_cadence(cron=schedule, timezone=timezone or "UTC")
    except ScheduleInvalid as error:
        if error.field != "cron":
            raise
        raise ScheduleInvalid("schedule", error.reason) from None


def build_spec(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    tags: Collection[str] = (),
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    executor: ExecutorChoice | None = None,
    priority: int = 0,
    version: int | None = None,
    durable: bool = False,
    max_resumes: int | None = None,
    schedule: str | None = None,
    timezone: str | None = None,
) -> TaskSpec:
    if not callable(fn):
        raise ConfigurationError(f"a task must be callable, got {type(fn).__name__}")
    if isinstance(tags, str):
        raise ConfigurationError("tags must be a collection of strings, not a single string")
    tag_set = frozenset(tags)
    for tag in tag_set:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"tags must be non-empty strings, got {tag!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
    if timeout is not None and not isinstance(timeout, Timeout):
        raise ConfigurationError(f"timeout must be a Timeout, got {type(timeout).__name__}")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigurationError(f"priority must be an int, got {priority!r}")
    if version is not None and not valid_version(version):
        raise ConfigurationError(f"version must be an int from 0 to 2**31 - 1, got {version!r}")
    signature = _signature(fn)
    is_coroutine = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )
    resumes = _check_durable(durable, max_resumes, is_coroutine)
    if schedule is not None or timezone is not None:
        _check_schedule(schedule, timezone)
    if is_coroutine and executor is not None:
        raise ConfigurationError(
            "async def tasks run on the event loop; executor= only applies to sync functions"
        )
    return TaskSpec(
        fn=fn,
        name=name or str(getattr(fn, "__name__", type(fn).__name__)),
        tags=tag_set,
        retry=retry,
        timeout=timeout,
        executor=executor,
        priority=priority,
        version=version,
        durable=durable,
        max_resumes=resumes,
        is_coroutine=is_coroutine,
        schedule=None if schedule is None else " ".join(schedule.split()),
        timezone=timezone,
        signature=signature,
    )


def _check_durable(durable: object, max_resumes: object, is_coroutine: bool) -> int:
    if not isinstance(durable, bool):
        raise ConfigurationError(f"durable must be True or False, got {durable!r}")
    if durable and not is_coroutine:
        raise ConfigurationError(
            "a durable task is an async def function (its steps are awaited: "
            "`await ctx.step(name, fn)`; a plain fn given to a step runs in a worker thread)"
        )
    if max_resumes is None:
        return DEFAULT_MAX_RESUMES
    if not durable:
        raise ConfigurationError("max_resumes applies to durable tasks only (durable=True)")
    if (
        isinstance(max_resumes, bool)
        or not isinstance(max_resumes, int)
        or not 0 <= max_resumes <= MAX_RESUMES
    ):
        raise ConfigurationError(
            f"max_resumes must be an int from 0 to 2**31 - 1 (what every store holds), "
            f"got {max_resumes!r}"
        )
    return max_resumes


def durable_needs_store(name: str, where: str) -> ConfigurationError:
    """The error for durable task ``name`` registered or run ``where`` no store is.

    Its steps, sleeps and facts live in the store: without one it would be
    accepted and then fail at its first step.
    """
    return ConfigurationError(
        f"task {name!r} is durable (its steps are kept in a store) and {where} has no "
        "store: give it one (Controller(store='tasks.db') or a postgresql:// DSN), or "
        "register the task without durable=True"
    )


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # builtins without introspection: trust the caller
    params = list(signature.parameters.values())
    takes_context = bool(params) and params[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
    )
    if not takes_context:
        name = getattr(fn, "__name__", repr(fn))
        raise ConfigurationError(
            f"task function {name}{signature} takes no context parameter; "
            f"write it as `def {name}(ctx, ...)` — the TaskContext is passed first"
        )
    return signature


_plain_specs: weakref.WeakKeyDictionary[Callable[..., Any], TaskSpec] = weakref.WeakKeyDictionary()


def spec_for(fn: Callable[..., Any]) -> TaskSpec:
    """The spec ``@task`` attached, or a default one for a plain function."""
    spec = getattr(fn, SPEC_ATTRIBUTE, None)
    if isinstance(spec, TaskSpec):
        return spec
    try:
        return _plain_specs[fn]
    except (KeyError, TypeError):
        pass
    spec = build_spec(fn)
    try:
        _plain_specs[fn] = spec
    except TypeError:
        pass  # not weak-referenceable: build it each time
    return spec


@overload
def task(fn: F, /) -> F: ...


@overload
def task(
    *,
    name: str | None = None,
    tags: Collection[str] = (),
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    executor: ExecutorChoice | None = None,
    priority: int = 0,
    version: int | None = None,
    durable: bool = False,
    max_resumes: int | None = None,
    schedule: str | None = None,
    timezone: str | None = None,
) -> Callable[[F], F]: ...


def task(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    tags: Collection[str] = (),
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    executor: ExecutorChoice | None = None,
    priority: int = 0,
    version: int | None = None,
    durable: bool = False,
    max_resumes: int | None = None,
    schedule: str | None = None,
    timezone: str | None = None,
) -> F | Callable[[F], F]:
    """Attach a :class:`TaskSpec` to a function and return the function unchanged.

    There is no global registry: importing a module that uses ``@task``
    registers nothing. A controller registers what it is given.
    """

    def decorate(target: F) -> F:
        spec = build_spec(
            target,
            name=name,
            tags=tags,
            retry=retry,
            timeout=timeout,
            executor=executor,
            priority=priority,
            version=version,
            durable=durable,
            max_resumes=max_resumes,
            schedule=schedule,
            timezone=timezone,
        )
        setattr(target, SPEC_ATTRIBUTE, spec)
        return target

    if fn is not None:
        return decorate(fn)
    return decorate
