"""``chongming worker`` pool and rate options: bad ones exit 1 with one line, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from chongming.cli.worker_options import parse_pool_options, parse_rate_option
from chongming.stores.rates import RateLimit
from tests.cli.support import assert_one_line_error, invoke


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (["--rate-limit", "vendor-api=0/s"], "--rate-limit vendor-api: the rate must be"),
        (["--rate-limit", "vendor-api=-1/s"], "--rate-limit vendor-api"),
        (["--rate-limit", "vendor-api=1e9/s"], "over 10000 starts/s"),
        (["--rate-limit", "vendor-api=fast"], "cannot read 'fast'"),
        (["--rate-limit", "vendor-api=10/week"], "unknown unit 'week'"),
        (["--rate-limit", "vendor-api=10/s burst 0"], "the burst must be"),
        (["--rate-limit", "10/s"], "--rate-limit is NAME=RATE"),
        (["--names", ","], "--names: names is empty"),
        (["--tags", ""], "--tags: tags is empty"),
        (["--exclude-tags", " , "], "--exclude-tags: exclude_tags is empty"),
        (["--versions", "charge"], "--versions: versions: 'charge' is not 'name@N'"),
        (["--versions", "charge@two"], "--versions: versions: 'charge@two'"),
    ],
)
def test_bad_worker_options_exit_1_and_write_nothing(
    tmp_path: Path, options: list[str], problem: str
) -> None:
    db = tmp_path / "tasks.db"
    result = invoke(db, "worker", "--tasks", "tests.cli.rate_tasks", *options)
    line = assert_one_line_error(result)
    assert problem in line
    assert not db.exists()


def test_good_options_read_as_the_controller_takes_them() -> None:
    name, limit = parse_rate_option("vendor-api=600/min burst 20")
    assert name == "vendor-api"
    assert limit.rate == 600
    assert limit.burst == 20
    assert str(limit) == "600/min burst 20"
    assert parse_rate_option("a=5/h") == ("a", RateLimit(rate=5, per=limit.per * 60))
    pool = parse_pool_options(
        names="charge, refund", tags="payments", exclude_tags=None, versions="charge@2,charge@3"
    )
    assert pool.names == {"charge", "refund"}
    assert pool.tags == {"payments"}
    assert pool.versions == {"charge@2", "charge@3"}
    assert dict(pool.pinned or {}) == {"charge": frozenset({2, 3})}
    assert pool.describe() == "names charge,refund; versions charge@2,charge@3; tags payments"
