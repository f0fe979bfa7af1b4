"""``chongming worker --rate-limit NAME=RATE``: one option as the worker reads it."""

from __future__ import annotations

from chongming.cli.session import CliError
from chongming.errors import PayloadError
from chongming.stores.rates import RateLimit, check_rate_name, parse_rate

__all__ = ["parse_rate_option"]


def parse_rate_option(text: str) -> tuple[str, RateLimit]:
    """``vendor-api=10/s`` or ``vendor-api=600/min burst 20``; else a :class:`CliError`."""
    name, sep, rate = text.partition("=")
    if not sep or not name.strip():
        raise CliError(f"--rate-limit is NAME=RATE (e.g. vendor-api=10/s), got {text!r}")
    try:
        return check_rate_name(name.strip()), parse_rate(rate, field=f"--rate-limit {name}")
    except PayloadError as error:
        raise CliError(str(error)) from None
