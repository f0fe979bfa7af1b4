"""The redacting log filter: every record that passes it carries no secret it can see.

:data:`TASK_LOG_REDACTION` sits on every task logger (``ctx.logger``,
``chongming.task.<task_id>``: :class:`~chongming.task_api.context.TaskContext`
attaches it), so the task logger redacts by default wherever it logs: on the
loop, in a thread, and in a process executor's child (whose records reach the
parent's task logger and pass it again). ``chongming worker`` puts the same
kind of filter on its own handler, so every line it writes (its own, the
runtime's and any library's) is redacted too.

A record is rewritten in place, once: its message is formatted from
arguments whose secret ones were masked first (a mapping's secret keys, the
``%s`` after ``token``), then redacted as text; its exception text and stack
are formatted and redacted into ``exc_text`` (which every ``logging.Formatter``
prints) and ``exc_info`` is dropped, since the exception object still holds
what its text had (a handler that wants the object, an error tracker's, gets
the text); its ``extra`` fields are masked by name. The rules are :mod:`chongming.logs.redaction`'s.

Turning it off (``TASK_LOG_REDACTION.enabled = False``) is for a debugging
session on a machine of your own; it is on unless you do.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Mapping
from typing import Any

from chongming.logs.redaction import (
    MASK,
    is_secret_name,
    redact_text,
    redact_value,
    secret_placeholders,
)

__all__ = ["STANDARD_ATTRIBUTES", "TASK_LOG_REDACTION", "RedactingFilter", "redact_record"]

#: The attributes every LogRecord has; anything else on a record came from ``extra=``.
STANDARD_ATTRIBUTES = frozenset(
    logging.LogRecord("", logging.INFO, "", 0, "", (), None).__dict__
) | {"message", "asctime", "taskName", "chongming_redacted"}

_DONE = "chongming_redacted"


class RedactingFilter(logging.Filter):
    """A filter that redacts each record it sees and lets it through (see the module docstring).

    ``secrets``: values to mask wherever they appear (added with :meth:`add_secrets`).
    """

    def __init__(self, secrets: Iterable[str] = (), *, enabled: bool = True) -> None:
        super().__init__()
        self.enabled = enabled
        self.secrets: frozenset[str] = frozenset(s for s in secrets if s)

    def add_secrets(self, secrets: Iterable[str]) -> None:
        self.secrets = self.secrets | {s for s in secrets if s}

    def filter(self, record: logging.LogRecord) -> bool:
        if self.enabled:
            redact_record(record, self.secrets)
        return True


#: The filter on every task logger: on by default.
TASK_LOG_REDACTION = RedactingFilter()


def redact_record(record: logging.LogRecord, secrets: Iterable[str] = ()) -> None:
    """Rewrite ``record`` so that it carries no secret it can see (idempotent)."""
    known = tuple(secrets)
    if getattr(record, _DONE, None) == known:
        return
    record.msg = redact_text(_message(record, known), known)
    record.args = None
    if record.exc_info and not record.exc_text:
        record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
    if record.exc_text:
        record.exc_text = redact_text(record.exc_text, known)
    record.exc_info = None  # the exception object holds the secrets its text had
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info, known)
    for name in [n for n in record.__dict__ if n not in STANDARD_ATTRIBUTES]:
        value = record.__dict__[name]
        record.__dict__[name] = MASK if is_secret_name(name) else redact_value(value, known)
    setattr(record, _DONE, known)


def _message(record: logging.LogRecord, secrets: tuple[str, ...]) -> str:
    """The record's message, formatted from arguments whose secret ones were masked."""
    args: Any = record.args
    template = record.msg if isinstance(record.msg, str) else str(record.msg)
    if not args:
        return template
    try:
        if isinstance(args, Mapping):
            return str(template % redact_value(args, secrets))
        masked = list(args) if isinstance(args, tuple) else [args]
        for position in secret_placeholders(template):
            if position < len(masked):
                masked[position] = MASK
        return str(template % tuple(_printable(value, secrets) for value in masked))
    except Exception:
        return f"{template!r} (its arguments did not format)"


def _printable(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, Mapping | list | tuple):
        return redact_value(value, secrets)
    return value
