"""The dashboard, Prometheus metrics and OpenTelemetry traces of chongming.

Everything here is optional: ``pip install 'chongming[web]'`` for the
dashboard and metrics, ``'chongming[otel]'`` for traces. Nothing is imported
until it is used, and a missing package is a :class:`MissingExtra` naming
the install command.

- :func:`create_app` — the dashboard, an ASGI app to serve with uvicorn or
  mount inside a FastAPI / Starlette service (``docs/dashboard.md``);
- :class:`~chongming.web.metrics.ChongmingMetrics` — an observer that counts
  into ``prometheus_client`` (``docs/observability.md``);
- :class:`~chongming.web.tracing.ChongmingTracing` — an observer that makes
  OpenTelemetry spans around attempts and store writes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from chongming.web.extras import MissingExtra

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.stores.base import TaskStore
    from chongming.web.app import Dashboard

__all__ = ["MissingExtra", "create_app"]


def create_app(
    controller_or_store_location: Controller | TaskStore | str | os.PathLike[str],
    *,
    read_only: bool = False,
    token: str | None = None,
    **options: Any,
) -> Dashboard:
    """The dashboard over a controller (yours) or a store location (opened query-only).

    ``read_only`` hides and refuses every control; ``token``, when given, is
    required on every request (a cookie set by ``/login``, or
    ``Authorization: Bearer``). See :func:`chongming.web.app.create_app`.
    """
    from chongming.web.app import create_app as create

    return create(controller_or_store_location, read_only=read_only, token=token, **options)
