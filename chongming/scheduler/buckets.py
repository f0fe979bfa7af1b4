"""Stable bucket numbers for business keys, and the ``0-15,32`` range syntax.

A bucket is both the unit of local isolation (``max_parallel_per_bucket``)
and the unit a node owns (``owned_buckets``). The mapping must therefore give
the same number in every process on every machine: it is blake2b, never the
builtin ``hash()``, whose ``str`` hashing is salted per process
(``PYTHONHASHSEED``) and would scatter one key over several nodes silently.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable

from chongming.errors import ConfigurationError, PayloadError

__all__ = ["BucketPolicy", "buckets_for_node", "format_bucket_ranges", "parse_bucket_ranges"]


@dataclasses.dataclass(frozen=True, slots=True)
class BucketPolicy:
    """Maps a ``bucket_key`` to one of ``num_buckets`` buckets.

    The formula is fixed by existing deployments (with 64 buckets ``tenant-A``
    is 7 and ``tenant-B`` is 28). Changing ``num_buckets`` moves almost every
    key, which is why tasks also store their ``bucket_key``.
    """

    num_buckets: int

    def __post_init__(self) -> None:
        _check_num_buckets(self.num_buckets)

    def bucket_for(self, key: str) -> int:
        """The bucket of ``key``.

        A non-string key raises :class:`PayloadError`: the key is stored with
        the task, and accepting ``42`` here but ``"42"`` elsewhere would put one
        tenant in two buckets.
        """
        if not isinstance(key, str):
            raise PayloadError("bucket_key", f"must be a string, got {type(key).__name__}")
        try:
            data = key.encode()
        except UnicodeEncodeError:
            raise PayloadError("bucket_key", "contains a lone surrogate") from None
        digest = hashlib.blake2b(data, digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.num_buckets


def buckets_for_node(index: int, count: int, num_buckets: int) -> range:
    """Node ``index`` of ``count``'s contiguous share of ``num_buckets`` (a partition).

    Every bucket goes to exactly one node and the shares differ by at most
    one bucket: with 64 buckets and 4 nodes, node 0 owns 0-15, node 3 owns
    48-63. Give each node of a partitioned fleet ``owned_buckets=`` (or
    ``--owned-buckets``) its share.
    """
    _check_num_buckets(num_buckets)
    for name, value in (("index", index), ("count", count)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"buckets_for_node: {name} must be an int, got {value!r}")
    if not 1 <= count <= num_buckets:
        raise ConfigurationError(
            f"buckets_for_node: count must be from 1 to num_buckets ({num_buckets}), got {count}"
        )
    if not 0 <= index < count:
        raise ConfigurationError(
            f"buckets_for_node: index must be from 0 to count - 1 ({count - 1}), got {index}"
        )
    return range(index * num_buckets // count, (index + 1) * num_buckets // count)


def parse_bucket_ranges(text: str, num_buckets: int) -> frozenset[int]:
    """Parse ``"0-15, 32"`` into the set of bucket numbers it names.

    Every part must be ``N`` or ``A-B`` with ``0 <= A <= B < num_buckets``;
    the error names the offending part and the valid range, because this
    string usually comes from a command line or a deployment file.
    """
    _check_num_buckets(num_buckets)
    if not isinstance(text, str):
        raise ConfigurationError(f"bucket ranges must be a string, got {type(text).__name__}")
    valid = f"valid buckets are 0-{num_buckets - 1}"
    if not text.strip():
        raise ConfigurationError(f"bucket ranges {text!r} are empty; {valid}")
    buckets: set[int] = set()
    for position, raw in enumerate(text.split(","), start=1):
        part = raw.strip()
        where = f"bucket ranges {text!r}: part {position}"
        if not part:
            raise ConfigurationError(f"{where} is empty; {valid}")
        if part.startswith("-"):
            raise ConfigurationError(f"{where} {part!r} is negative; {valid}")
        low_text, dash, high_text = part.partition("-")
        if dash:
            low = _parse_number(low_text, where, part, valid)
            high = _parse_number(high_text, where, part, valid)
            if low > high:
                raise ConfigurationError(f"{where} {part!r} is a reversed range; {valid}")
        else:
            low = high = _parse_number(part, where, part, valid)
        if high >= num_buckets:
            raise ConfigurationError(f"{where} {part!r} is out of range; {valid}")
        buckets.update(range(low, high + 1))
    return frozenset(buckets)


def format_bucket_ranges(buckets: Iterable[int]) -> str:
    """The compact inverse of :func:`parse_bucket_ranges`: ``{0, 1, 2, 5}`` → ``"0-2,5"``."""
    numbers = sorted(set(buckets))
    parts: list[str] = []
    index = 0
    while index < len(numbers):
        start = end = numbers[index]
        while index + 1 < len(numbers) and numbers[index + 1] == end + 1:
            index += 1
            end = numbers[index]
        parts.append(str(start) if start == end else f"{start}-{end}")
        index += 1
    return ",".join(parts)


def _parse_number(text: str, where: str, part: str, valid: str) -> int:
    stripped = text.strip()
    # isdecimal() refuses signs, so "-3" (which partitions as "" and "3") and
    # "+3" fail here too; isascii() keeps out digits from other scripts.
    if not (stripped.isascii() and stripped.isdecimal()):
        raise ConfigurationError(f"{where} {part!r} is not a bucket number or range; {valid}")
    return int(stripped)


def _check_num_buckets(num_buckets: object) -> None:
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or num_buckets <= 0:
        raise ConfigurationError(f"num_buckets must be a positive integer, got {num_buckets!r}")
