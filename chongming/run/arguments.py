"""What a run's callers pass beside the task's own arguments: tags and actors, checked first.

Refused with a typed error naming the field before anything is built.
"""

from __future__ import annotations

from collections.abc import Collection

from chongming.errors import ConfigurationError
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.state.actors import check_actor as check_actor
from chongming.state.payload import check_reason

__all__ = ["check_actor", "check_run_options", "check_tags"]


def check_tags(tags: Collection[str]) -> frozenset[str]:
    """Tags as a frozenset of non-empty strings; a bare string is refused."""
    if isinstance(tags, str):
        raise ConfigurationError("tags must be a collection of strings, not a single string")
    result = frozenset(tags)
    for tag in result:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"tags must be non-empty strings, got {tag!r}")
        check_reason(tag, "tag")
    return result


def check_run_options(retry: object, timeout: object, windows: object, priority: object) -> None:
    """The policies and the priority given to one run (``None``: the task's own)."""
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
    if timeout is not None and not isinstance(timeout, Timeout):
        raise ConfigurationError(f"timeout must be a Timeout, got {type(timeout).__name__}")
    if windows is not None and not isinstance(windows, ControlWindows):
        raise ConfigurationError(f"windows must be a ControlWindows, got {type(windows).__name__}")
    if priority is not None and (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not -(2**31) <= priority < 2**31
    ):
        raise ConfigurationError(f"priority must be a 32-bit int, got {priority!r}")
