"""A module that refuses to be imported in a worker: its tasks end ``launch_error``."""

from __future__ import annotations

import multiprocessing

from chongming import TaskContext

if multiprocessing.parent_process() is not None:
    raise RuntimeError("this module refuses to load in a worker process")


def unreachable(ctx: TaskContext) -> int:
    return 1
