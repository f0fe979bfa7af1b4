"""The in-memory store: the reference the store contract is written against."""

from chongming.stores.memory.store import InMemoryTaskStore as InMemoryTaskStore

__all__ = ["InMemoryTaskStore"]
