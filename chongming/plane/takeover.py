"""Whether the live lease on an owner name belongs to a process that is gone.

A worker SIGKILLed and restarted at once under the same ``--owner`` finds
its old node row still leased (for up to ``lease_ttl``): the dead process
cannot release it. A supervisor restarting with a fixed name would then
crash-loop for the whole ttl. When the row names **this host** and its
process is provably gone, the new process may take the lease over instead.

Gone means, on this host: no process has that pid (``ESRCH``), or it is a
zombie (killed, not reaped yet by its parent), or the process holding the
pid now started after the row was registered (the pid was reused), or the
pid is this very process's and no node of this process holds that
incarnation (a container restarted: its new process got the same pid).
Anything else — a live process we may not signal, a pid we cannot inspect,
another host — is not provably gone, and the lease is left to run out.

Host names must be unique per pid namespace for this to hold: two
containers on different machines sharing one ``hostname`` and one owner
name would take each other's lease (they were misconfigured already: one
owner name is one node).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime

__all__ = ["held_here", "holder_is_gone", "let_go_here"]

#: Incarnations of the nodes registered by this process and not released yet.
_HELD_HERE: set[str] = set()
#: How much later than the row a process must have started to count as a reused pid.
#: Generous: the row's time is the store's clock, the process's this host's.
_REUSE_MARGIN = 60.0


def held_here(incarnation: str) -> None:
    _HELD_HERE.add(incarnation)


def let_go_here(incarnation: str) -> None:
    _HELD_HERE.discard(incarnation)


def holder_is_gone(host: str, pid: int, incarnation: str, registered_at: datetime) -> bool:
    """True when the process that registered this row on this host has ended (see above)."""
    if host != socket.gethostname():
        return False
    if pid == os.getpid():
        return incarnation not in _HELD_HERE
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # a process of another user has it: look closer below
    except OSError:
        return False
    return _zombie_or_younger(pid, registered_at)


def _zombie_or_younger(pid: int, registered_at: datetime) -> bool:
    """From ``/proc`` (Linux): a zombie, or a process started after ``registered_at``.

    Read on the loop thread on purpose: procfs files are made by the kernel
    from memory when read (no disk, no wait), two small reads per takeover
    check of a same-host holder; a worker thread would cost more than that.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith(b"btime "))
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return False  # not Linux, or it ended meanwhile: not provably gone
    if fields[0] == b"Z":
        return True
    started = boot + int(fields[19]) / ticks  # field 22 of stat: start time in ticks
    return started > registered_at.timestamp() + _REUSE_MARGIN
