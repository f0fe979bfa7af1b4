"""Task modules and command-line arguments: the only code and data ``run`` accepts.

A command line that could start any callable would be remote code execution
for whoever can type into it. So ``--tasks`` names one importable module that
must define ``register(controller)``; ``run`` then starts only a name that
module registered, with JSON arguments. No ``module:function`` string is ever
resolved and no other module is imported on the CLI's behalf.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from chongming.cli.session import CliError, one_line

if TYPE_CHECKING:
    from chongming.controller.controller import Controller

__all__ = ["load_task_module", "parse_arguments", "register_tasks"]

_MAX_MODULE_NAME = 200
#: Keyword names ``Controller.submit`` takes for itself: a task argument of the
#: same name would silently become a submit option.
_RESERVED = frozenset(
    {"name", "task_id", "label", "bucket_key", "priority", "tags", "retry", "timeout"}
)


def load_task_module(name: str) -> ModuleType:
    """Import the module named by ``--tasks`` (from the working directory too, like ``-m``)."""
    _check_module_name(name)
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and (name == error.name or name.startswith(error.name + ".")):
            raise CliError(
                f"--tasks {name!r}: no such module (is its directory on PYTHONPATH?)"
            ) from None
        raise CliError(f"--tasks {name!r} failed to import: {_describe(error)}") from error
    except (Exception, SystemExit) as error:
        raise CliError(f"--tasks {name!r} failed to import: {_describe(error)}") from error
    register = getattr(module, "register", None)
    if not callable(register):
        raise CliError(
            f"--tasks {name!r} defines no register(controller) function; a task module "
            "registers its tasks there (see docs/cli.md, 'Task modules')"
        )
    return module


async def register_tasks(module: ModuleType, controller: Controller) -> None:
    """Call the module's ``register(controller)`` (it may be a coroutine function)."""
    try:
        result = module.register(controller)
        if inspect.isawaitable(result):
            await result
    except Exception as error:
        raise CliError(
            f"register(controller) of {module.__name__!r} failed: {_describe(error)}"
        ) from error


def parse_arguments(pairs: Sequence[str], json_args: str | None) -> dict[str, Any]:
    """``--json-args '{...}'`` and ``--arg k=v`` as the task's keyword arguments.

    A ``--arg`` value that parses as JSON is taken as JSON (``n=3`` is the
    number 3, ``flag=true`` a boolean, ``name='"007"'`` a string); anything
    else is the string itself (``tenant=A``). Use ``--json-args`` for exact types.
    """
    arguments: dict[str, Any] = {}
    if json_args is not None:
        try:
            parsed = strict_json(json_args)
        except (ValueError, RecursionError) as error:
            raise CliError(f"--json-args is not valid JSON: {error}") from None
        if not isinstance(parsed, dict):
            raise CliError(
                f"--json-args must be a JSON object of keyword arguments, "
                f"got {type(parsed).__name__}"
            )
        arguments.update(parsed)
    given: set[str] = set()
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise CliError(f"--arg {pair!r} has no '=': write --arg key=value")
        if not key.isidentifier():
            raise CliError(f"--arg key {key!r} is not a Python identifier")
        if key in given or key in arguments:
            raise CliError(f"argument {key!r} is given twice")
        given.add(key)
        arguments[key] = _value(raw)
    for key in arguments:
        if key in _RESERVED:
            raise CliError(
                f"argument {key!r} clashes with the run option of the same name; "
                "use --task-id / --label / --bucket-key for those"
            )
    return arguments


def _value(raw: str) -> Any:
    try:
        return strict_json(raw)
    except (ValueError, RecursionError):
        return raw


def strict_json(text: str) -> Any:
    """``json.loads`` of JSON only: ``NaN``, ``Infinity`` and numbers too large
    for a float (``1e400``) are not JSON, so they raise :class:`ValueError`.
    """
    return json.loads(text, parse_constant=_not_json, parse_float=_finite)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a number")
    return value


def _check_module_name(name: str) -> None:
    if not name or len(name) > _MAX_MODULE_NAME:
        raise CliError(f"--tasks takes a module name of 1 to {_MAX_MODULE_NAME} characters")
    if ":" in name:
        raise CliError(
            f"--tasks {one_line(name)!r}: a module name, not 'module:function' "
            "(the module's register(controller) chooses what may run)"
        )
    if not all(part.isidentifier() for part in name.split(".")):
        raise CliError(f"--tasks {one_line(name)!r} is not a dotted module name")


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
