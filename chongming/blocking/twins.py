"""Blocking twins: a plain method made from a coroutine method, for the sync facade.

``name = blocking_twin(Controller.name)`` in a facade class body gives it a
method with the coroutine's parameters, annotations and docstring (for
``help()``, ``inspect.signature`` and mypy, through a ``ParamSpec``), so the
facade cannot drift from what it mirrors. Called, the twin runs the
same-named method of the facade's target (:class:`Bridge`) on the loop
thread and blocks until it answers. A hand-written twin (:func:`extends`)
keeps the coroutine's docstring and adds its own. Each twin carries
``__blocking_twin_of__``: the parity test and the facade find twins by it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

__all__ = ["Bridge", "blocking_twin", "extends", "loop_twin"]

_R = TypeVar("_R")
_Self = TypeVar("_Self")
_P = ParamSpec("_P")


class Bridge(Protocol):
    """What a twin needs from the facade object it is called on."""

    @property
    def _bridge_target(self) -> Any:
        """The async object whose method of the same name the twin calls."""

    def _bridge_call(self, call: Callable[[], Any], /) -> Any:
        """Run ``call`` on the loop thread (awaiting it if it is a coroutine); block."""


def blocking_twin(
    method: Callable[Concatenate[_Self, _P], Awaitable[_R]],
) -> Callable[Concatenate[Bridge, _P], _R]:
    """The blocking twin of the coroutine method ``method``, for a facade class body.

    ``submit = blocking_twin(Controller.submit)`` gives ``BlockingController``
    a plain method with ``Controller.submit``'s parameters, annotations and
    docstring, typed ``(name: str, *args, task_id=..., ...) -> TaskRun`` for
    mypy. Called, it runs the same-named coroutine of the facade's target on
    the loop thread and blocks the calling thread until it has an answer.
    """
    return _twin(method)


def loop_twin(
    method: Callable[Concatenate[_Self, _P], _R],
) -> Callable[Concatenate[Bridge, _P], _R]:
    """Like :func:`blocking_twin` for a plain method that must run on the loop thread.

    ``Controller.register`` is not a coroutine, but the controller's state is
    the loop's: the call still crosses to the loop thread.
    """
    return _twin(method)


def _twin(method: Callable[..., Any]) -> Callable[..., Any]:
    name = method.__name__

    def twin(self: Bridge, /, *args: Any, **kwargs: Any) -> Any:
        bound = getattr(self._bridge_target, name)
        return self._bridge_call(functools.partial(bound, *args, **kwargs))

    functools.update_wrapper(twin, method)
    twin.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    twin.__blocking_twin_of__ = method  # type: ignore[attr-defined]
    return twin


def extends(method: Callable[..., Any]) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A hand-written twin: ``method``'s docstring first, then what the facade adds."""

    def decorate(twin: Callable[_P, _R]) -> Callable[_P, _R]:
        own = inspect.cleandoc(twin.__doc__ or "")
        twin.__doc__ = inspect.cleandoc(method.__doc__ or "") + "\n\n" + own
        twin.__blocking_twin_of__ = method  # type: ignore[attr-defined]
        return twin

    return decorate
