"""Helpers users can import to test their own code and backends.

Importing this package never imports pytest: :class:`StoreContract` is a plain
class whose ``test_*`` coroutines a test runner collects from a subclass.
"""

from chongming.testing.store_contract import StoreContract as StoreContract

__all__ = ["StoreContract"]
