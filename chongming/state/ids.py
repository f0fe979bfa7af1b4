"""Task ids: 16 hex digits, unique enough across nodes, short enough for tables.

Drawn from a Mersenne Twister seeded once from the OS's randomness (and again
in a forked child, so parent and child never share a stream) instead of an
``os.urandom`` call per id: that is a system call, 26 µs under GIL contention
with worker threads. The ids need not be unpredictable, only unique: 64
random bits make a collision among a billion ids about 3 in 100,000.
"""

from __future__ import annotations

import os
import random

__all__ = ["new_task_id", "random_bits"]

_source = random.Random()  # seeded from os.urandom
os.register_at_fork(after_in_child=_source.seed)

#: ``random_bits(64)``: the id source, for a hot path that formats it inline.
random_bits = _source.getrandbits


def new_task_id() -> str:
    """16 hex digits (64 random bits)."""
    return "%016x" % random_bits(64)  # noqa: UP031 -- the fastest of the three spellings
