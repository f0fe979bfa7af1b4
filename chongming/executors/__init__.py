"""Executors carry sync task functions; coroutines run on the loop itself.

Names are imported on first use: the process executor pulls in
``multiprocessing`` and its protocol, which a controller that never runs a
task in a subprocess should not pay for at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming.exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from chongming.executors.base import CarrierFailure as CarrierFailure
    from chongming.executors.base import Executor as Executor
    from chongming.executors.base import StopSemantics as StopSemantics
    from chongming.executors.inline import InlineExecutor as InlineExecutor
    from chongming.executors.process.executor import ProcessExecutor as ProcessExecutor
    from chongming.executors.process.target import in_child_loop as in_child_loop
    from chongming.executors.thread import ThreadExecutor as ThreadExecutor

_WHERE: dict[str, str] = {
    "CarrierFailure": "chongming.executors.base",
    "Executor": "chongming.executors.base",
    "StopSemantics": "chongming.executors.base",
    "InlineExecutor": "chongming.executors.inline",
    "ProcessExecutor": "chongming.executors.process.executor",
    "in_child_loop": "chongming.executors.process.target",
    "ThreadExecutor": "chongming.executors.thread",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, globals())
