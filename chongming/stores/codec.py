"""Field codecs shared by the SQL backends: each value checked and encoded once.

Structured fields become compact JSON text: progress and failure in the shape
:mod:`chongming.state.serialize` gives them, user payloads (result, args,
kwargs) through :func:`chongming.state.payload.dump_json` (which refuses what
no store can keep), tags as a sorted JSON array. Every encoder raises
:class:`~chongming.errors.PayloadError` through :mod:`chongming.stores.checks`,
so each store refuses the same input with the same error. The row layout
itself is :mod:`chongming.stores.columns`; :mod:`chongming.stores.rowcodec`
turns it into row encoders and decoders.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from chongming.errors import PayloadError
from chongming.state.payload import check_json_size, dump_json
from chongming.state.records import Failure, FailureKind, Progress
from chongming.state.serialize import (
    failure_from_json,
    failure_to_json,
    progress_from_json,
    progress_to_json,
)
from chongming.state.status import TaskStatus
from chongming.stores.checks import check_failure, check_progress, check_text

__all__ = [
    "STATUS_OF",
    "STATUS_TEXT",
    "cached_tags",
    "decode_args",
    "decode_failure",
    "decode_kwargs",
    "decode_payload",
    "decode_progress",
    "decode_tags",
    "dump",
    "encode_failure",
    "encode_made_failure",
    "encode_made_progress",
    "encode_payload",
    "encode_progress",
    "encode_status",
    "encode_tags",
]

_loads = json.loads


def _refuse(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _make_dump() -> Callable[[Any], str]:
    """A reusable C encoder: ``JSONEncoder.encode`` builds a new one per call (3x slower).

    Only for values whose parts were checked already (no cycle detection,
    ``markers=None``); user payloads go through ``dump_json``.
    """
    if c_make_encoder is None:  # pragma: no cover - CPython always ships _json
        return json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
    encoder = c_make_encoder(None, _refuse, encode_basestring, None, ":", ",", False, False, False)

    def dump(value: Any) -> str:
        if isinstance(value, str):
            return encode_basestring(value)
        return "".join(encoder(value, 0))

    return dump


#: ``json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))``, faster.
dump = _make_dump()

#: A status's stored text -> the member (a dict lookup is 5x faster than ``TaskStatus(text)``).
STATUS_OF: dict[str, TaskStatus] = {status.value: status for status in TaskStatus}
_STATUS_TEXT: dict[object, str] = {status: status.value for status in TaskStatus}
#: A member -> its stored text (for records already checked: a trusted write).
STATUS_TEXT: dict[object, str] = _STATUS_TEXT

_TAGS: dict[frozenset[str], str] = {}
_TAGS_BACK: dict[str, frozenset[str]] = {"[]": frozenset()}
_CACHE_BOUND = 4096  # tag sets repeat; bound the caches all the same


def encode_status(status: object) -> str:
    text = _STATUS_TEXT.get(status)
    if text is None:
        raise PayloadError("status", f"must be a TaskStatus, got {status!r}")
    return text


def encode_tags(tags: frozenset[str]) -> str:
    """A sorted JSON array of checked text (cached: most tasks share a few tag sets)."""
    if not isinstance(tags, frozenset):
        raise PayloadError("tags", f"must be a frozenset of strings, got {type(tags).__name__}")
    text = _TAGS.get(tags)
    if text is None:
        for tag in tags:
            if not isinstance(tag, str):
                raise PayloadError("tag", f"must be a string, got {type(tag).__name__}")
            check_text(tag, "tag")
        text = dump(sorted(tags))
        if len(_TAGS) < _CACHE_BOUND:
            _TAGS[tags] = text
    return text


#: The stored text of a tag set seen before, or ``None`` (then :func:`encode_tags`).
cached_tags: Callable[[frozenset[str]], str | None] = _TAGS.get


def decode_tags(text: str) -> frozenset[str]:
    tags = _TAGS_BACK.get(text)
    if tags is None:
        tags = frozenset(_loads(text))
        if len(_TAGS_BACK) < _CACHE_BOUND:
            _TAGS_BACK[text] = tags
    return tags


def encode_progress(progress: Progress | None, limit: int | None = None) -> str | None:
    if progress is None:
        return None
    check_progress(progress)
    return _capped(dump(progress_to_json(progress)), "progress", limit)


def encode_made_progress(progress: Progress, limit: int | None = None) -> str:
    """A progress the runtime checked when it was reported: encoded, within ``limit``."""
    return _capped(dump(progress_to_json(progress)), "progress", limit)


def decode_progress(text: str | None) -> Progress | None:
    return None if text is None else progress_from_json(_loads(text))


def encode_failure(failure: Failure | None, limit: int | None = None) -> str | None:
    if failure is None:
        return None
    check_failure(failure)
    if not isinstance(failure.kind, FailureKind):
        raise PayloadError("failure kind", f"must be a FailureKind, got {failure.kind!r}")
    return _capped(dump(failure_to_json(failure)), "failure", limit)


def encode_made_failure(failure: Failure) -> str:
    """A failure the runtime made (its texts made storable where it was made)."""
    return dump(failure_to_json(failure))


def decode_failure(text: str | None) -> Failure | None:
    return None if text is None else failure_from_json(_loads(text))


def encode_payload(value: Any, what: str, limit: int | None) -> str:
    """User JSON (checked by the shared payload rules), within ``limit`` bytes."""
    if value is None:
        return "null"
    if not value and (value == () or value == {} or value == []):
        return "{}" if isinstance(value, Mapping) else "[]"
    if isinstance(value, Mapping) and type(value) is not dict:
        value = dict(value)
    return _capped(dump_json(value, what), what, limit)


def decode_payload(text: str | None) -> Any:
    return None if text is None else _loads(text)


def decode_args(text: str) -> tuple[Any, ...]:
    return () if text == "[]" else tuple(_loads(text))


def decode_kwargs(text: str) -> dict[str, Any]:
    return {} if text == "{}" else dict(_loads(text))


def _capped(text: str, what: str, limit: int | None) -> str:
    if limit is not None:
        check_json_size(text, what, limit)
    return text
