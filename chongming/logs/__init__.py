"""Logging that keeps secrets out: the redacting task logger and the worker's log formats.

- :mod:`chongming.logs.redaction` — the rules (pure functions);
- :mod:`chongming.logs.records` — :class:`RedactingFilter`, and
  :data:`TASK_LOG_REDACTION`, the filter on every task logger (on by default);
- :mod:`chongming.logs.formats` — ``text`` and ``json`` lines for ``chongming worker``.

It imports nothing of chongming but :mod:`chongming.errors`, so every layer may use it.
"""

from __future__ import annotations

from chongming.logs.formats import JsonFormatter as JsonFormatter
from chongming.logs.formats import LogFormat as LogFormat
from chongming.logs.formats import TextFormatter as TextFormatter
from chongming.logs.formats import install_handler as install_handler
from chongming.logs.records import TASK_LOG_REDACTION as TASK_LOG_REDACTION
from chongming.logs.records import RedactingFilter as RedactingFilter
from chongming.logs.records import redact_record as redact_record
from chongming.logs.redaction import redact_text as redact_text
from chongming.logs.redaction import redact_value as redact_value

__all__ = [
    "TASK_LOG_REDACTION",
    "JsonFormatter",
    "LogFormat",
    "RedactingFilter",
    "TextFormatter",
    "install_handler",
    "redact_record",
    "redact_text",
    "redact_value",
]
