"""The two log formats of ``chongming worker``: ``text`` for people, ``json`` for shippers.

- ``text``: ``2026-10-02T14:01:23.456Z INFO chongming.task.job-1: message``;
  line breaks inside the message are written ``\\n`` (a task cannot forge a
  line), a traceback follows on its own lines.
- ``json``: one JSON object per line, always (``json.dumps`` escapes every
  line break): ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``,
  ``task_id`` for a task logger's record, ``exception`` and ``stack`` when
  present, and every ``extra=`` field (values that are not JSON are written
  as their ``str``).

Both formatters print what a :class:`~chongming.logs.records.RedactingFilter`
left; :func:`install_handler` puts one in front of them.
"""

from __future__ import annotations

import enum
import json
import logging
from datetime import UTC, datetime
from typing import IO, Any

from chongming.errors import ConfigurationError
from chongming.logs.records import STANDARD_ATTRIBUTES, RedactingFilter

__all__ = [
    "LOG_LEVELS",
    "JsonFormatter",
    "LogFormat",
    "TextFormatter",
    "install_handler",
    "parse_log_format",
    "parse_log_level",
]

TASK_LOGGER_PREFIX = "chongming.task."
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
LOG_LEVELS["error"] = logging.ERROR


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


def parse_log_format(text: str) -> LogFormat:
    """``"text"`` or ``"json"`` (any case); anything else is a :class:`ConfigurationError`."""
    try:
        return LogFormat(str(text).strip().lower())
    except ValueError:
        choices = ", ".join(f.value for f in LogFormat)
        raise ConfigurationError(f"unknown log format {text!r}: choose one of {choices}") from None


def parse_log_level(text: str) -> int:
    """``debug``, ``info``, ``warning`` or ``error``; anything else is a ConfigurationError."""
    level = LOG_LEVELS.get(str(text).strip().lower())
    if level is None:
        choices = ", ".join(LOG_LEVELS)
        raise ConfigurationError(f"unknown log level {text!r}: choose one of {choices}")
    return level


def utc_time(created: float) -> str:
    """``2026-10-02T14:01:23.456Z``."""
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage().replace("\r", "\\r").replace("\n", "\\n")
        line = f"{utc_time(record.created)} {record.levelname} {record.name}: {message}"
        exception = _exception_text(self, record)
        if exception:
            line += "\n" + exception
        if record.stack_info:
            line += "\n" + record.stack_info
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json_line(record, _exception_text(self, record))


def json_line(record: logging.LogRecord, exception: str | None = None, **fields: Any) -> str:
    """One JSON object, one line, for ``record`` (plus ``fields``)."""
    data: dict[str, Any] = {
        "time": utc_time(record.created),
        "level": record.levelname.lower(),
        "logger": record.name,
        "message": record.getMessage(),
    }
    if record.name.startswith(TASK_LOGGER_PREFIX):
        data["task_id"] = record.name[len(TASK_LOGGER_PREFIX) :]
    if exception:
        data["exception"] = exception
    if record.stack_info:
        data["stack"] = record.stack_info
    for name, value in record.__dict__.items():
        if name not in STANDARD_ATTRIBUTES and name not in data:
            data[name] = value
    data.update(fields)
    return json.dumps(data, ensure_ascii=False, default=str, allow_nan=False)


def _exception_text(formatter: logging.Formatter, record: logging.LogRecord) -> str | None:
    if record.exc_info and not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    return record.exc_text or None


def formatter_for(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format is LogFormat.JSON else TextFormatter()


def install_handler(
    log_format: LogFormat,
    *,
    stream: IO[str],
    level: int = logging.INFO,
    redaction: RedactingFilter | None = None,
    logger: logging.Logger | None = None,
) -> logging.Handler:
    """A handler on ``logger`` (the root's by default) writing ``log_format`` to ``stream``.

    Every record is redacted by ``redaction`` (a fresh filter if ``None``)
    before it is formatted. The logger's level is set to ``level``. Remove it
    with ``logger.removeHandler(handler)`` (the worker does on its way out).
    """
    target = logger if logger is not None else logging.getLogger()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter_for(log_format))
    handler.addFilter(redaction if redaction is not None else RedactingFilter())
    handler.setLevel(level)
    target.addHandler(handler)
    target.setLevel(level)
    return handler
