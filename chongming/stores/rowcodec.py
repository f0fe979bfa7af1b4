"""Row encoders and decoders compiled from the column table, per dialect.

:data:`~chongming.stores.columns.TASK_COLUMNS` says what each column holds;
a :class:`Dialect` says how each :class:`~chongming.stores.columns.Kind` is
written and read in one backend (only timestamps and tags differ between
SQLite and PostgreSQL). From the two, :func:`compile_encoder` and
:func:`compile_decoder` build one plain function each, the way ``dataclasses``
builds ``__init__``: encoding a snapshot is on the path of every save, and a
generated function with one expression per column costs a third of a loop
over per-column callables. Every encoder checks as it encodes (through
:mod:`chongming.stores.codec` and :mod:`chongming.stores.checks`) and raises
:class:`~chongming.errors.PayloadError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming.state.payload import check_label, check_task_id
from chongming.state.records import TaskSnapshot
from chongming.stores import codec
from chongming.stores.checks import check_text, check_time
from chongming.stores.columns import Column, Kind

__all__ = [
    "POSTGRES",
    "SQLITE",
    "SQLITE_TRUSTED",
    "Decoder",
    "Dialect",
    "Encoder",
    "compile_decoder",
    "compile_encoder",
]

#: ``encoder(snapshot, limit, expect)`` -> the parameters of one statement.
Encoder = Callable[[TaskSnapshot, "int | None", "int | None"], tuple[Any, ...]]
Decoder = Callable[[Sequence[Any]], TaskSnapshot]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _text(value: Any, what: str) -> Any:
    check_text(value, what)
    return value


def _micros(value: Any, what: str) -> int:
    return (check_time(value, what) - _EPOCH) // _MICROSECOND


def _namespace() -> dict[str, Any]:
    return {
        "_EPOCH": _EPOCH,
        "_US": _MICROSECOND,
        "_UTC": UTC,
        "_td": timedelta,
        "_key": check_task_id,
        "_label": check_label,
        "_text": _text,
        "_time": check_time,
        "_micros": _micros,
        "_status": codec.encode_status,
        "_STATUS_OF": codec.STATUS_OF,
        "_tags": codec.encode_tags,
        "_decode_tags": codec.decode_tags,
        "_progress": codec.encode_progress,
        "_decode_progress": codec.decode_progress,
        "_failure": codec.encode_failure,
        "_decode_failure": codec.decode_failure,
        "_payload": codec.encode_payload,
        "_dump": codec.dump,
        "_STATUS_TEXT": codec.STATUS_TEXT,
        "_TAGS_TEXT": codec.cached_tags,
        "_progress_made": codec.encode_made_progress,
        "_failure_made": codec.encode_made_failure,
        "_decode_payload": codec.decode_payload,
        "_decode_args": codec.decode_args,
        "_decode_kwargs": codec.decode_kwargs,
        "TaskSnapshot": TaskSnapshot,
    }


def _encode_common(column: Column) -> str:
    """The expression encoding ``s.<field>``, for kinds every dialect writes alike."""
    name = column.name
    value = f"s.{name}"
    expressions = {
        Kind.KEY: f"_key({value})",
        Kind.TEXT: f"_text({value}, {name!r})",
        Kind.LABEL: f"_label({value})",
        Kind.INTEGER: value,
        Kind.STATUS: f"_status({value})",
        Kind.TAGS: f"_tags({value})",
        Kind.PROGRESS: f"_progress({value}, limit)",
        Kind.FAILURE: f"_failure({value}, limit)",
        Kind.PAYLOAD: f"_payload({value}, {name!r}, limit)",
        Kind.ARGS: f"_payload({value}, {name!r}, limit)",
        Kind.KWARGS: f"_payload({value}, {name!r}, limit)",
    }
    return expressions[column.kind]


def _decode_common(column: Column, value: str) -> str:
    expressions = {
        Kind.KEY: value,
        Kind.TEXT: value,
        Kind.LABEL: value,
        Kind.INTEGER: value,
        Kind.STATUS: f"_STATUS_OF[{value}]",
        Kind.PROGRESS: f"_decode_progress({value})",
        Kind.FAILURE: f"_decode_failure({value})",
        Kind.PAYLOAD: f"_decode_payload({value})",
        Kind.ARGS: f"_decode_args({value})",
        Kind.KWARGS: f"_decode_kwargs({value})",
    }
    return expressions[column.kind]


def _time(column: Column, value: str, fast: str, checked: str) -> str:
    """``fast`` (over ``v``, bound to ``value``) when ``v`` is aware UTC, else ``checked``.

    Aware UTC is what the runtime makes; anything else takes the checked path.
    """
    if column.nullable:
        return f"(None if (v := {value}) is None else {fast} if v.tzinfo is _UTC else {checked})"
    return f"({fast} if (v := {value}).tzinfo is _UTC else {checked})"


def _sqlite_encode(column: Column) -> str:
    if column.kind is Kind.TIME:
        checked = f"_micros(v, {column.name!r})"
        return _time(column, f"s.{column.name}", "(v - _EPOCH) // _US", checked)
    return _encode_common(column)


def _sqlite_encode_trusted(column: Column) -> str:
    """A record the runtime made and checked (a trusted write): encoded, not checked again.

    Texts go as they are, payloads (already in their JSON form) through the
    reusable C encoder, progress within the store's cap.
    """
    name = column.name
    value = f"s.{name}"
    kind = column.kind
    if kind is Kind.TIME:
        return _sqlite_encode(column)
    if kind in (Kind.KEY, Kind.TEXT, Kind.LABEL, Kind.INTEGER):
        return value
    if kind is Kind.STATUS:
        return f"_STATUS_TEXT[{value}]"
    if kind is Kind.TAGS:
        return f"(_TAGS_TEXT(v) or _tags(v) if (v := {value}) else '[]')"
    if kind is Kind.PROGRESS:
        return f"(None if (v := {value}) is None else _progress_made(v, limit))"
    if kind is Kind.FAILURE:
        return f"(None if (v := {value}) is None else _failure_made(v))"
    if kind is Kind.PAYLOAD:
        return f"('null' if (v := {value}) is None else _dump(v))"
    if kind is Kind.ARGS:
        return f"(_dump(v) if (v := {value}) else '[]')"
    return f"(_dump(v) if (v := {value}) else '{{}}')"  # Kind.KWARGS


def _sqlite_decode(column: Column, value: str) -> str:
    if column.kind is Kind.TIME:
        if column.nullable:
            return f"(None if (v := {value}) is None else _EPOCH + _td(microseconds=v))"
        return f"_EPOCH + _td(microseconds={value})"
    if column.kind is Kind.TAGS:
        return f"_decode_tags({value})"
    return _decode_common(column, value)


def _postgres_encode(column: Column) -> str:
    if column.kind is Kind.TIME:
        return _time(column, f"s.{column.name}", "v", f"_time(v, {column.name!r})")
    return _encode_common(column)  # tags travel as one JSON array each (see postgres/sql.py)


def _postgres_decode(column: Column, value: str) -> str:
    if column.kind is Kind.TIME:
        # asyncpg returns aware UTC datetimes for timestamptz, except for
        # ``infinity`` / ``-infinity`` (what an aware datetime.max / min is
        # sent as): those come back as naive datetime.max / min.
        aware = "(v if v.tzinfo is not None else v.replace(tzinfo=_UTC))"
        if column.nullable:
            return f"(None if (v := {value}) is None else {aware})"
        return f"(v if (v := {value}).tzinfo is not None else v.replace(tzinfo=_UTC))"
    if column.kind is Kind.TAGS:
        return f"frozenset({value})"
    return _decode_common(column, value)


@dataclasses.dataclass(frozen=True, slots=True)
class Dialect:
    """How one backend writes and reads each kind of column."""

    name: str
    encode: Callable[[Column], str]
    decode: Callable[[Column, str], str]

    def sql_type(self, column: Column) -> str:
        return column.sqlite if self.name == "sqlite" else column.postgres


SQLITE = Dialect("sqlite", _sqlite_encode, _sqlite_decode)
#: SQLite's encoding of a trusted write (see :func:`_sqlite_encode_trusted`).
SQLITE_TRUSTED = Dialect("sqlite", _sqlite_encode_trusted, _sqlite_decode)
POSTGRES = Dialect("postgres", _postgres_encode, _postgres_decode)


def compile_encoder(
    dialect: Dialect,
    columns: Sequence[Column],
    *,
    blank: Collection[Column] = (),
    tail: Sequence[str] = (),
) -> Encoder:
    """A function ``(snapshot, limit, expect) -> tuple`` of ``columns`` in order.

    ``blank`` columns are sent as ``None`` (not encoded, not checked);
    ``tail`` adds raw expressions at the end (e.g. ``"s.task_id", "expect"``
    for a ``WHERE task_id = ? AND status_version = ?``).
    """
    parts = ["None" if column in blank else dialect.encode(column) for column in columns]
    parts.extend(tail)
    body = ",\n        ".join(parts)
    source = f"def encode(s, limit, expect=None):\n    return (\n        {body},\n    )\n"
    encoder: Encoder = _compile(source, f"{dialect.name} row encoder", "encode")
    return encoder


def compile_decoder(dialect: Dialect, columns: Sequence[Column]) -> Decoder:
    """A function ``row -> TaskSnapshot`` for rows holding ``columns`` first, in order."""
    body = ",\n        ".join(
        f"{column.name}={dialect.decode(column, f'row[{index}]')}"
        for index, column in enumerate(columns)
    )
    source = f"def decode(row):\n    return TaskSnapshot(\n        {body},\n    )\n"
    decoder: Decoder = _compile(source, f"{dialect.name} row decoder", "decode")
    return decoder


def _compile(source: str, label: str, name: str) -> Any:
    namespace = _namespace()
    exec(compile(source, f"<chongming {label}>", "exec"), namespace)
    return namespace[name]
