"""The buckets a CLI node owns: ``--owned-buckets`` ranges, or ``--node I/N`` (its share)."""

from __future__ import annotations

from chongming.cli.session import CliError
from chongming.errors import ConfigurationError
from chongming.scheduler.buckets import buckets_for_node, parse_bucket_ranges

__all__ = ["owned_buckets_of"]


def owned_buckets_of(
    owned_buckets: str | None, node: str | None, num_buckets: int
) -> frozenset[int] | None:
    """What ``--owned-buckets`` or ``--node`` name (``None``: every bucket), or ``CliError``."""
    parsed = _parse_owned(owned_buckets, num_buckets)
    if node is None:
        return parsed
    if owned_buckets is not None:
        raise CliError("--node and --owned-buckets both name the owned buckets: give one")
    return _parse_node(node, num_buckets)


def _parse_owned(text: str | None, num_buckets: int) -> frozenset[int] | None:
    try:
        if num_buckets <= 0:
            raise ConfigurationError(f"--num-buckets must be positive, got {num_buckets}")
        return None if text is None else parse_bucket_ranges(text, num_buckets)
    except ConfigurationError as error:
        raise CliError(f"--owned-buckets: {error}" if text is not None else str(error)) from None


def _parse_node(text: str, num_buckets: int) -> frozenset[int]:
    """``I/N``: the buckets node I of a fleet of N owns (contiguous ranges that cover all)."""
    index, slash, count = text.partition("/")
    if not slash or not index.strip().isdigit() or not count.strip().isdigit():
        raise CliError(f"--node must be I/N, e.g. 0/4 (node 0 of 4), got {text!r}")
    try:
        return frozenset(buckets_for_node(int(index), int(count), num_buckets))
    except ConfigurationError as error:
        raise CliError(f"--node {text}: {error}") from None
