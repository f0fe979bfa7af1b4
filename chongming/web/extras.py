"""What the optional parts need, and the error that says how to install it.

``import chongming`` never imports starlette, prometheus_client or
opentelemetry: each part of :mod:`chongming.web` asks for its packages when
it is used, and a missing one is a :class:`MissingExtra` naming the
``pip install`` command.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtra", "need"]


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"this part of chongming needs {module!r}, which is not installed: "
            f"pip install 'chongming[{extra}]'",
            name=module,
        )
        self.extra = extra


def need(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtra` for ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        if error.name is not None and module.split(".")[0] != error.name.split(".")[0]:
            raise  # the package is there but something inside it is broken: show that
        raise MissingExtra(extra, module) from error
