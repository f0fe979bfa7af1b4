"""The control plane: a controller as one node of a shared store.

Write-through of every transition, read-through of other processes' tasks,
commands across processes, node leases and reconcile.
"""

from chongming.control.failures import PersistFailures as PersistFailures
from chongming.control.location import open_store as open_store

__all__ = ["PersistFailures", "open_store"]
