"""``Controller(rate_limits=...)``: checked once, then handed to the worker's rate gate."""

from __future__ import annotations

from collections.abc import Mapping

from chongming.errors import ConfigurationError, PayloadError
from chongming.stores.base import TaskStore
from chongming.stores.rates import RateLimit, check_rate_name, parse_rate

__all__ = ["check_rate_limits", "check_rate_store"]


def check_rate_limits(limits: object) -> dict[str, RateLimit]:
    """A mapping of tag to a rate (``"10/s"``, ``"5/h burst 20"`` or a :class:`RateLimit`).

    Every fault is a :class:`ConfigurationError` naming the entry: a rate of
    0 or below, over the most a store keeps, a text that does not parse, an
    unknown unit, a burst below 1.
    """
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise ConfigurationError(
            f"rate_limits must be a mapping of tag to rate (e.g. {{'vendor-api': '10/s'}}), "
            f"got {type(limits).__name__}"
        )
    checked: dict[str, RateLimit] = {}
    for name, rate in limits.items():
        field = f"rate_limits[{name!r}]"
        try:
            checked[check_rate_name(name)] = parse_rate(rate, field=field)
        except PayloadError as error:
            message = str(error) if error.what == field else f"{field}: {error}"
            raise ConfigurationError(message) from None
    return checked


def check_rate_store(limits: Mapping[str, RateLimit], store: TaskStore) -> None:
    """Rate limits are decided by the shared store: it must have them."""
    if limits and type(store).take_rate_grants is TaskStore.take_rate_grants:
        raise ConfigurationError(f"{type(store).__name__} has no cluster-wide rate limits")
