"""Checks for everything that will be stored: JSON values, ids and labels.

Both SQLite and PostgreSQL must accept whatever passes here, so the rules are
the stricter of the two: no NaN or infinity, no NUL, no lone surrogates.
Failing early with :class:`PayloadError` means nothing is ever half-stored.

Integers are kept within signed 64 bits: what SQLite and PostgreSQL keep as
exact integers, and far below the 4,300 digits Python's ``json`` refuses.
:func:`json_form` gives a value the shape it has once read back from any
store (tuples become lists, non-string keys become strings), so every store
answers the same for the same input.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from chongming.errors import ConfigurationError, PayloadError

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "MAX_LABEL_LENGTH",
    "MAX_TASK_ID_LENGTH",
    "check_arguments",
    "check_encoded_json",
    "check_json_size",
    "check_label",
    "check_limit",
    "check_payload",
    "check_reason",
    "check_task_id",
    "dump_json",
    "json_form",
    "json_form_arguments",
    "load_json",
    "plain_json",
]

MAX_TASK_ID_LENGTH = 200
MAX_LABEL_LENGTH = 256
MAX_REASON_LENGTH = 2000
#: Arguments and results are stored; past this size, store a pointer instead.
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20

# An escaped NUL is "\u0000" preceded by an even number of backslashes.
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_SCALARS = (bool, int, type(None))
_PLAIN = frozenset({bool, int, float, str, type(None)})
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1
#: Digits (with sign) beyond which a JSON integer cannot fit in 64 bits.
_INT_DIGITS = 19
_LONG_DIGITS = re.compile(r"\d{19}")


def dump_json(value: Any, what: str) -> str:
    """Serialise ``value`` or raise :class:`PayloadError` saying why not."""
    kind = type(value)
    if kind is int:
        _check_int(value, what)
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise PayloadError(what, "nested too deeply to store as JSON") from None
    except (TypeError, ValueError) as error:
        raise PayloadError(what, f"not JSON-serialisable ({error})") from None
    check_json_text(text, what)
    if kind is not int and kind not in (str, float, bool, type(None)):
        _check_ints_in(text, what)
    return text


def json_form(value: Any, what: str, limit: int | None = DEFAULT_MAX_PAYLOAD_BYTES) -> Any:
    """``value`` as every store returns it, after the checks of :func:`check_payload`.

    Scalars come back as they are; containers are encoded once and decoded,
    so a tuple is a list and ``{1: "a"}`` is ``{"1": "a"}`` before anything
    is stored or handed out.
    """
    kind = type(value)
    if kind in _SCALARS or kind is float or kind is str:
        check_payload(value, what, limit)
        return value
    text = dump_json(value, what)
    if limit is not None:
        check_json_size(text, what, limit)
    return json.loads(text)


def json_form_arguments(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    limit: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Checked arguments in the JSON form the function would get on any node."""
    check_arguments(args, kwargs, limit)
    if any(type(value) not in _PLAIN for value in args):
        args = tuple(value if type(value) in _PLAIN else _decoded(value) for value in args)
    if any(type(value) not in _PLAIN for value in kwargs.values()):
        kwargs = {
            key: value if type(value) in _PLAIN else _decoded(value)
            for key, value in kwargs.items()
        }
    return args, kwargs


def _decoded(value: Any) -> Any:
    return json.loads(dump_json(value, "argument"))


def plain_json(value: object) -> bool:
    """True for the values every check passes as they are: None, a bool, a 64-bit int.

    A shortcut for results on the hot path; anything else goes through
    :func:`json_form`.
    """
    kind = type(value)
    if kind is int:
        return _INT_MIN <= value <= _INT_MAX  # type: ignore[operator]
    return value is None or kind is bool


def check_reason(value: object, what: str = "reason") -> str | None:
    """A reason or actor given to a control call: text every store can keep."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise PayloadError(what, f"must be a string, got {type(value).__name__}")
    if len(value) > MAX_REASON_LENGTH:
        raise PayloadError(what, f"longer than {MAX_REASON_LENGTH} characters")
    _check_string(value, what)
    return value


def _check_int(value: int, what: str) -> None:
    if not _INT_MIN <= value <= _INT_MAX:
        raise PayloadError(what, "holds an integer outside signed 64 bits (stores cannot keep it)")


def _check_ints_in(text: str, what: str) -> None:
    """Refuse encoded JSON holding an integer outside signed 64 bits (cheap when none can)."""
    if len(text) < _INT_DIGITS or not _LONG_DIGITS.search(text):
        return
    json.loads(text, parse_int=lambda digits: _parse_int(digits, what))


def _parse_int(digits: str, what: str) -> int:
    if len(digits) >= _INT_DIGITS:
        _check_int(int(digits), what)
    return 0


def check_json_value(value: Any, what: str) -> None:
    """Like :func:`dump_json` but cheap for the scalars most tasks use."""
    kind = type(value)
    if kind is int:
        _check_int(value, what)
        return
    if kind in _SCALARS:
        return
    if kind is str:
        _check_string(value, what)
        return
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise PayloadError(what, "NaN and infinity are not JSON")
        return
    dump_json(value, what)


def check_payload(value: Any, what: str, limit: int | None = DEFAULT_MAX_PAYLOAD_BYTES) -> None:
    """:func:`check_json_value` plus the size cap (UTF-8 bytes of its JSON)."""
    kind = type(value)
    if kind in _SCALARS or kind is float:
        check_json_value(value, what)
        return
    if kind is str:
        _check_string(value, what)
        if limit is not None:
            check_json_size(value, what, limit)  # the quotes and escapes are noise here
        return
    text = dump_json(value, what)
    if limit is not None:
        check_json_size(text, what, limit)


def check_arguments(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    limit: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
) -> None:
    """Each argument is JSON, and all of them together fit the payload cap.

    Scalars cost a type check; the whole is encoded only when a rough count
    says it might be near the cap.
    """
    rough = 0
    for index, value in enumerate(args):
        rough += _rough_size(value, f"argument {index}")
    for key, value in kwargs.items():
        rough += len(key) + _rough_size(value, f"argument {key!r}")
    if limit is not None and rough * 4 > limit:
        check_json_size(dump_json([list(args), kwargs], "arguments"), "arguments", limit)


def _rough_size(value: Any, what: str) -> int:
    kind = type(value)
    if kind is str:
        _check_string(value, what)
        return len(value) + 2
    if kind in _SCALARS or kind is float:
        check_json_value(value, what)
        return 24
    return len(dump_json(value, what))


def check_json_size(text: str, what: str, limit: int) -> None:
    """Refuse ``text`` when its UTF-8 encoding is over ``limit`` bytes (cheap when far under)."""
    if len(text) * 4 <= limit:
        return
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise PayloadError(
            what,
            f"{size:,} bytes as JSON, over the {limit:,}-byte limit; "
            "store large data elsewhere and pass a pointer",
        )


def check_encoded_json(text: str, what: str) -> None:
    """Everything :func:`dump_json` checks, for JSON text encoded elsewhere."""
    check_json_text(text, what)
    _check_ints_in(text, what)


def check_json_text(text: str, what: str) -> None:
    if "\\u0000" in text and _ESCAPED_NUL.search(text):
        raise PayloadError(what, "contains a NUL character, which PostgreSQL cannot store")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise PayloadError(
                what, "contains a lone surrogate, which is not valid UTF-8"
            ) from None


def check_limit(limit: object) -> int | None:
    """A ``max_payload_bytes`` setting: a positive int, or ``None`` for no cap."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigurationError(f"max_payload_bytes must be a positive int or None, got {limit!r}")
    return limit


def load_json(text: str) -> Any:
    return json.loads(text)


def check_task_id(task_id: object) -> str:
    """Task ids are printable text: they appear in tables, URLs and logs."""
    if not isinstance(task_id, str):
        raise PayloadError("task_id", f"must be a string, got {type(task_id).__name__}")
    if not task_id:
        raise PayloadError("task_id", "must not be empty")
    if len(task_id) > MAX_TASK_ID_LENGTH:
        raise PayloadError("task_id", f"longer than {MAX_TASK_ID_LENGTH} characters")
    if _has_control_characters(task_id):
        raise PayloadError("task_id", "contains control characters")
    _check_string(task_id, "task_id")
    return task_id


def check_label(label: object) -> str:
    """Labels are free text, shown escaped; only what no store can hold is refused."""
    if not isinstance(label, str):
        raise PayloadError("label", f"must be a string, got {type(label).__name__}")
    if len(label) > MAX_LABEL_LENGTH:
        raise PayloadError("label", f"longer than {MAX_LABEL_LENGTH} characters")
    _check_string(label, "label")
    return label


def _check_string(value: str, what: str) -> None:
    if value.isascii():
        if "\x00" in value:
            raise PayloadError(what, "contains a NUL character, which PostgreSQL cannot store")
        return
    if "\x00" in value:
        raise PayloadError(what, "contains a NUL character, which PostgreSQL cannot store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PayloadError(what, "contains a lone surrogate, which is not valid UTF-8") from None


def _has_control_characters(value: str) -> bool:
    # Only C0/C1 controls are refused: they break logs and terminals. Other
    # invisible characters (bidi overrides, joiners in emoji) are legal text
    # and are escaped wherever a table prints them.
    if value.isascii():
        return not value.isprintable()
    return any(unicodedata.category(c) == "Cc" for c in value)


def valid_version(value: object) -> bool:
    """A registered task version: an int from 0 to 2**31 - 1 (``name@N``)."""
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value < 2**31
