"""BucketPolicy and the bucket-range syntax."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chongming.errors import ConfigurationError, PayloadError
from chongming.scheduler.buckets import (
    BucketPolicy,
    format_bucket_ranges,
    parse_bucket_ranges,
)


def test_known_deployment_numbers() -> None:
    policy = BucketPolicy(64)
    assert policy.bucket_for("tenant-A") == 7
    assert policy.bucket_for("tenant-B") == 28


def test_bucket_is_within_range_and_stable() -> None:
    policy = BucketPolicy(5)
    for index in range(200):
        key = f"key-{index}"
        bucket = policy.bucket_for(key)
        assert 0 <= bucket < 5
        assert policy.bucket_for(key) == bucket


def test_one_bucket_maps_everything_to_zero() -> None:
    assert {BucketPolicy(1).bucket_for(str(n)) for n in range(50)} == {0}


def test_non_ascii_keys_are_hashed_as_utf8() -> None:
    policy = BucketPolicy(1 << 30)
    assert policy.bucket_for("租户A") != policy.bucket_for("租户B")


@pytest.mark.parametrize("num_buckets", [0, -1, 1.5, "64", True, None])
def test_num_buckets_must_be_a_positive_int(num_buckets: object) -> None:
    with pytest.raises(ConfigurationError, match="num_buckets"):
        BucketPolicy(num_buckets)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", [42, None, b"tenant-A", ("tenant-A",)])
def test_key_must_be_a_string(key: object) -> None:
    with pytest.raises(PayloadError, match="bucket_key: must be a string"):
        BucketPolicy(64).bucket_for(key)  # type: ignore[arg-type]


def test_lone_surrogate_key_is_refused() -> None:
    with pytest.raises(PayloadError, match="surrogate"):
        BucketPolicy(64).bucket_for("bad\ud800")


_CHILD = """
import json, sys
from chongming.scheduler.buckets import BucketPolicy
policy = BucketPolicy(64)
keys = [f"tenant-{i}" for i in range(100)]
print(json.dumps({"buckets": [policy.bucket_for(k) for k in keys],
                  "hashes": [hash(k) % 64 for k in keys]}))
"""


def _run_child(seed: str) -> dict[str, list[int]]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, list[int]] = json.loads(completed.stdout)
    return result


def test_same_buckets_under_every_hash_seed() -> None:
    results = [_run_child(seed) for seed in ("0", "1", "random")]
    assert results[0]["buckets"] == results[1]["buckets"] == results[2]["buckets"]
    in_process = [BucketPolicy(64).bucket_for(f"tenant-{i}") for i in range(100)]
    assert results[0]["buckets"] == in_process
    # The control: the builtin hash really differs between these processes, so
    # an implementation built on hash() would have failed the assertion above.
    assert results[0]["hashes"] != results[1]["hashes"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-15,32", set(range(16)) | {32}),
        (" 0 - 3 ,  9 ", {0, 1, 2, 3, 9}),
        ("5", {5}),
        ("5-5", {5}),
        ("0-63", set(range(64))),
        ("3,1,2,2", {1, 2, 3}),
    ],
)
def test_parse_bucket_ranges(text: str, expected: set[int]) -> None:
    assert parse_bucket_ranges(text, 64) == frozenset(expected)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("1,,2", "part 2 is empty"),
        ("1,", "part 2 is empty"),
        ("5-3", "'5-3' is a reversed range"),
        ("-1", "'-1' is negative"),
        ("x", "'x' is not a bucket number"),
        ("1-", "'1-' is not a bucket number"),
        ("1-2-3", "'1-2-3' is not a bucket number"),
        ("+3", "'\\+3' is not a bucket number"),
        ("1.5", "'1.5' is not a bucket number"),
        ("٣", "is not a bucket number"),
        ("64", "'64' is out of range"),
        ("0-64", "'0-64' is out of range"),
    ],
)
def test_parse_bucket_ranges_rejects(text: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem) as caught:
        parse_bucket_ranges(text, 64)
    assert "valid buckets are 0-63" in str(caught.value)


def test_parse_checks_num_buckets() -> None:
    with pytest.raises(ConfigurationError, match="num_buckets"):
        parse_bucket_ranges("0", 0)


@pytest.mark.parametrize(
    ("buckets", "text"),
    [
        ([], ""),
        ([5], "5"),
        ([0, 1, 2, 3, 9], "0-3,9"),
        ({12, 11, 0, 2, 1}, "0-2,11-12"),
        (range(16), "0-15"),
    ],
)
def test_format_bucket_ranges(buckets: list[int], text: str) -> None:
    assert format_bucket_ranges(buckets) == text


def test_format_and_parse_round_trip() -> None:
    chosen = frozenset({0, 1, 2, 7, 9, 10, 11, 30, 63})
    assert parse_bucket_ranges(format_bucket_ranges(chosen), 64) == chosen
