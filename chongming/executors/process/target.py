"""What may be sent to a worker process: a function's importable name, checked at submit.

A worker never receives code, only ``module`` and ``qualname``; it imports
the module and looks the name up. So a target must be a function defined at
the top level of a module the worker can import, and that name must lead to
the very function that was registered. Everything else is refused when the
task is submitted, with the reason and the fix, instead of failing in the
child later:

- a lambda or a function defined inside another function (a closure);
- a callable that is not a plain function (a ``functools.partial``, a bound
  method, an instance with ``__call__``);
- any target while the main script has no ``if __name__ == "__main__":``
  guard: every worker imports the main script again (that is how functions
  defined in it are found), and without the guard it would run the whole
  program a second time, in each worker;
- a function of ``__main__`` when a worker cannot import ``__main__``: an
  interactive session, ``python -c``, or a package's ``__main__`` module
  (``python -m package``), which multiprocessing never re-imports;
- an ``async def`` function not wrapped by :func:`in_child_loop`.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from chongming.errors import ConfigurationError
from chongming.task_api.spec import SPEC_ATTRIBUTE

__all__ = ["ChildLoopTarget", "TargetName", "in_child_loop", "name_target", "resolve_target"]


class TargetName(NamedTuple):
    """Where a worker finds the function: ``import module``, then ``module.qualname``."""

    module: str
    qualname: str


class ChildLoopTarget:
    """An ``async def`` task that runs on an event loop of its own in a worker process.

    Made by :func:`in_child_loop`. To the runtime it is a plain callable, so
    it goes through the executor instead of running on the caller's loop;
    a :class:`ProcessExecutor` worker awaits the coroutine function on a
    fresh event loop, where ``await ctx.checkpoint()`` works as usual.
    """

    def __init__(self, coroutine: Callable[..., Any]) -> None:
        self.coroutine = coroutine
        self.__module__ = coroutine.__module__
        self.__name__ = coroutine.__name__
        self.__qualname__ = coroutine.__qualname__
        self.__doc__ = coroutine.__doc__
        self.__signature__ = inspect.signature(coroutine)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigurationError(
            f"{self.__qualname__} was wrapped by in_child_loop(): it runs only on a "
            "ProcessExecutor; register the async def function itself to run it on the loop"
        )

    def __repr__(self) -> str:
        return f"in_child_loop({self.__module__}.{self.__qualname__})"


def in_child_loop(fn: Callable[..., Any]) -> ChildLoopTarget:
    """Mark an ``async def`` task to run in a worker process, on the worker's own loop.

    An ``async def`` task normally runs on the caller's event loop and never
    goes through an executor. Wrap it to send it to a :class:`ProcessExecutor`
    instead (for CPU-heavy coroutines, or native code that may crash)::

        controller.register("crunch", in_child_loop(crunch), executor=processes)

    or as a decorator, under ``@task``::

        @task(executor=processes)
        @in_child_loop
        async def crunch(ctx, n): ...
    """
    if not inspect.iscoroutinefunction(fn):
        raise ConfigurationError(
            f"in_child_loop() takes an async def function, got {_shown(fn)}; "
            "a plain def function goes to a ProcessExecutor as it is"
        )
    if hasattr(fn, SPEC_ATTRIBUTE):
        raise ConfigurationError(
            f"{fn.__qualname__} already carries a @task spec: put @task above "
            "@in_child_loop so that the spec describes the wrapped task"
        )
    return ChildLoopTarget(fn)


def name_target(fn: Callable[..., Any]) -> TargetName:
    """The importable name of ``fn``, or a :class:`ConfigurationError` saying what to change."""
    inner = fn.coroutine if isinstance(fn, ChildLoopTarget) else fn
    if isinstance(inner, functools.partial):
        raise _refuse(
            fn,
            "a functools.partial cannot be sent to a worker by name; "
            "pass the bound values as task arguments instead",
        )
    if inspect.iscoroutinefunction(inner) and not isinstance(fn, ChildLoopTarget):
        raise _refuse(fn, "an async def task runs on the loop; wrap it with in_child_loop()")
    if not isinstance(inner, types.FunctionType):
        raise _refuse(
            fn,
            "a ProcessExecutor runs functions defined with def at the top level of a module, "
            f"not a {type(inner).__name__}",
        )
    module_name, qualname = inner.__module__, inner.__qualname__
    if "<lambda>" in qualname:
        raise _refuse(
            fn,
            "a lambda has no name a worker process could import; "
            "define it with def at the top level of a module",
        )
    if "<locals>" in qualname:
        raise _refuse(
            fn,
            "it is defined inside another function, so a worker process cannot import it "
            "(and cannot see the variables it closes over); move it to the top level of a "
            "module and pass what it needs as JSON arguments",
        )
    module = sys.modules.get(module_name)
    if module is None:
        raise _refuse(fn, f"its module {module_name!r} is not imported in this process")
    found = _lookup(module, qualname)
    if found is not fn and found is not inner:
        raise _refuse(
            fn,
            f"{module_name}.{qualname} names another object in its module "
            "(was the function redefined or decorated under the same name?); "
            "register the object that the module attribute holds",
        )
    _check_main(fn, defined_there=module_name == "__main__")
    return TargetName(module_name, qualname)


def resolve_target(name: TargetName) -> tuple[Callable[..., Any], bool]:
    """In the worker: import the target; returns the function and whether it is async."""
    module = importlib.import_module(name.module)
    found = _lookup(module, name.qualname)
    if isinstance(found, ChildLoopTarget):
        return found.coroutine, True
    if not callable(found):
        raise TypeError(f"{name.module}.{name.qualname} is not callable")
    return found, inspect.iscoroutinefunction(found)


def _lookup(module: types.ModuleType, qualname: str) -> Any:
    found: Any = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
        if found is None:
            return None
    return found


def _check_main(fn: Callable[..., Any], *, defined_there: bool) -> None:
    path = main_script()
    if path is not None and not _has_main_guard(path):
        raise _refuse(
            fn,
            f'the main script {path} has no `if __name__ == "__main__":` guard: every worker '
            "process imports it again and would run the whole program a second time; put "
            "the code that runs the program under the guard",
        )
    if defined_there and path is None:
        raise _refuse(
            fn,
            "it is defined in a __main__ that a worker process cannot import (an interactive "
            "session, python -c, or python -m package); move it into a module file",
        )


def main_script() -> str | None:
    """The file a worker imports again as its main module, as multiprocessing decides it."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if isinstance(name, str):
        if name == "__main__" or name.endswith(".__main__"):
            return None  # python -m package: never imported again
        origin = getattr(spec, "origin", None)
        return origin if isinstance(origin, str) else None
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or path.endswith("__init__.py"):
        return None
    return path


@functools.cache
def _guard_in(path: str, modified: float) -> bool:
    try:
        with open(path, "rb") as file:
            tree = ast.parse(file.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.If) and _is_main_test(node.test) for node in tree.body)


def _has_main_guard(path: str) -> bool:
    try:
        modified = os.stat(path).st_mtime
    except OSError:
        return False
    return _guard_in(path, modified)


def _is_main_test(test: ast.expr) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_test(value) for value in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [side for side in sides if isinstance(side, ast.Name) and side.id == "__name__"]
    constants = [
        side for side in sides if isinstance(side, ast.Constant) and side.value == "__main__"
    ]
    return len(names) == 1 and len(constants) == 1


def _refuse(fn: Callable[..., Any], reason: str) -> ConfigurationError:
    return ConfigurationError(f"{_shown(fn)} cannot run on a ProcessExecutor: {reason}")


def _shown(fn: object) -> str:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        return f"{module}.{qualname}"
    return repr(fn)[:80]
