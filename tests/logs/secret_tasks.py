"""Tasks that log secrets every way a task can (importable: the process executor runs them)."""

from __future__ import annotations

from typing import Any

CANARY = "Cn4ry-5ecret-9f3a"
DSN = f"postgresql://app:{CANARY}@db.internal:5432/orders"


def log_everything(ctx: Any) -> str:
    """Each log path of a task: text, %-args, mapping args, extra fields, an exception."""
    ctx.log("connecting to %s", DSN)
    ctx.log("login as %s with token %s", "bob", CANARY)
    ctx.warning("calling https://api.example.com/v1/charge?api_key=%s&amount=3", CANARY)
    ctx.logger.info("headers %s", {"Authorization": f"Bearer {CANARY}", "Accept": "json"})
    ctx.logger.info("secret fields", extra={"client_secret": CANARY, "rows": 3})
    ctx.logger.info("%(user)s uses password %(password)s", {"user": "bob", "password": CANARY})
    try:
        raise ConnectionError(f"could not reach {DSN}: password={CANARY} refused")
    except ConnectionError:
        ctx.logger.exception("the charge failed")
    ctx.error("multi\nline token=%s", CANARY)
    return "logged"


async def log_everything_async(ctx: Any) -> str:
    return log_everything(ctx)
