"""The controller: the facade that wires registry, admission and runs together.

Names are imported on first use, so importing a submodule (the CLI's views,
the dashboard) does not load the whole facade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming.exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from chongming.controller.controller import Controller as Controller
    from chongming.controller.statistics import ControllerStats as ControllerStats

_WHERE: dict[str, str] = {
    "Controller": "chongming.controller.controller",
    "ControllerStats": "chongming.controller.statistics",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, globals())
