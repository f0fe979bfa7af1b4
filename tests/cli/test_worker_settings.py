"""The pure parts of ``chongming worker``'s settings: checks and the start-up line."""

from __future__ import annotations

import math

import pytest

from chongming import Controller
from chongming.cli.session import CliError
from chongming.cli.worker_command import (
    Endpoint,
    WorkerSettings,
    check_endpoint,
    check_poll_interval,
    startup_fields,
    startup_text,
)
from chongming.logs.formats import LogFormat


async def _double(ctx: object, n: int) -> int:
    return 2 * n


async def test_the_start_up_line_names_owned_buckets_versions_and_disabled_endpoints() -> None:
    controller = Controller(owner="node-a", num_buckets=64, owned_buckets=range(16))
    controller.register("sync", _double)
    controller.register("resize", _double, version=1)
    controller.register("resize", _double, version=2)
    settings = WorkerSettings(max_parallel=4, grace=5, lease_ttl=12, poll_interval=0.5)
    fields = startup_fields(controller, settings, "tasks.db", {})
    assert startup_text(fields) == (
        "worker node-a serving resize@1, resize@2, sync; max_parallel 4; cluster limits none; "
        "lease_ttl 12s; poll_interval 0.5s; reconcile every -; grace 5s; buckets 0-15 of 64; "
        "store tasks.db; metrics off; health off; log text info, redacted"
    )
    assert fields["owned_buckets"] == "0-15"
    assert (fields["metrics"], fields["health"], fields["redaction"]) == (None, None, "on")
    await controller.close()


def test_endpoints_and_poll_intervals_are_checked() -> None:
    assert check_endpoint("--metrics-port", "127.0.0.1", None) is None
    assert check_endpoint("--metrics-port", " ::1 ", 9464) == Endpoint(host="::1", port=9464)
    assert check_endpoint("--health-port", "0.0.0.0", 0) == Endpoint(host="0.0.0.0", port=0)
    for port in (-1, 65536, True):
        with pytest.raises(CliError, match="must be a port between 0 and 65535"):
            check_endpoint("--health-port", "127.0.0.1", port)
    with pytest.raises(CliError, match="address or a host name"):
        check_endpoint("--health-port", "local\nhost", 80)
    assert check_poll_interval(0.05) == 0.05
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(CliError, match="--poll-interval must be a number of seconds > 0"):
            check_poll_interval(bad)
    assert WorkerSettings().log_format is LogFormat.TEXT
