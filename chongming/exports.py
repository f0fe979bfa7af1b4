"""Lazy package exports: a package names what it exports; each is imported on first use.

Why: ``import chongming`` (and ``chongming.stores``, ``chongming.executors``,
``chongming.plane``) must stay cheap for one-shot commands and must not pull
in optional drivers (asyncpg) or heavy parts (multiprocessing, the store
backends) that the caller never touches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``where`` maps name -> module.

    A name found is stored in ``namespace`` (the package's globals), so later
    lookups skip the hook; an unknown name raises ``AttributeError``, which also
    lets ``from package import submodule`` fall back to importing the submodule.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__
