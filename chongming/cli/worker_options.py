"""``chongming worker --rate-limit NAME=RATE`` and the pool options, as the worker reads them."""

from __future__ import annotations

from chongming.cli.session import CliError
from chongming.controller.pools import WorkerPool, check_pool
from chongming.errors import ConfigurationError, PayloadError
from chongming.stores.rates import RateLimit, check_rate_name, parse_rate

__all__ = ["parse_pool_options", "parse_rate_option"]


def parse_rate_option(text: str) -> tuple[str, RateLimit]:
    """``vendor-api=10/s`` or ``vendor-api=600/min burst 20``; else a :class:`CliError`."""
    name, sep, rate = text.partition("=")
    if not sep or not name.strip():
        raise CliError(f"--rate-limit is NAME=RATE (e.g. vendor-api=10/s), got {text!r}")
    try:
        return check_rate_name(name.strip()), parse_rate(rate, field=f"--rate-limit {name}")
    except PayloadError as error:
        raise CliError(str(error)) from None


def parse_pool_options(
    *,
    names: str | None,
    tags: str | None,
    exclude_tags: str | None,
    versions: str | None,
    age_step: float = 0.0,
) -> WorkerPool:
    """``--names a,b --tags t --exclude-tags u --versions name@2`` as a pool; else a CliError."""
    given = {"names": names, "tags": tags, "exclude_tags": exclude_tags, "versions": versions}
    split = {
        field: None if text is None else [part.strip() for part in text.split(",") if part.strip()]
        for field, text in given.items()
    }
    try:
        return check_pool(**split, age_step=None if age_step == 0 else age_step)
    except ConfigurationError as error:
        field = str(error).split(" ", 1)[0].rstrip(":")
        option = "--" + field.replace("_", "-")
        raise CliError(f"{option}: {error}") from None
