"""The process executor: sync task functions in reusable worker processes.

One module per part: ``executor`` (``ProcessExecutor``, the parent's side),
``pool`` and ``worker_handle`` (the workers it keeps), ``job`` (one call in
a worker), ``calls`` (finishing despite a cancellation), ``protocol`` (the
frames on the pipe), ``target`` (a function named so a child can import it),
``worker`` and ``child`` (the child's side). Names are imported on first use:
a worker process imports only the child's side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming.exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from chongming.executors.process.executor import ProcessExecutor as ProcessExecutor
    from chongming.executors.process.target import in_child_loop as in_child_loop

_WHERE: dict[str, str] = {
    "ProcessExecutor": "chongming.executors.process.executor",
    "in_child_loop": "chongming.executors.process.target",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, globals())
