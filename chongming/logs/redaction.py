"""Redaction of secrets in log text and log fields: pure functions, no logging, no I/O.

What is a secret here (the seed's redacting logger, ``docs/worker-operations.md``):

- **Fields by name.** A mapping key, a ``key=value`` / ``key: value`` pair in
  text, or a ``%s`` placeholder right after such a name, whose name contains
  one of :data:`SECRET_WORDS` (``token``, ``key``, ``secret``, ``password``,
  ...), case-insensitively: ``api_key``, ``X-Auth-Token``, ``passkey`` and
  ``db_password`` all count. ``Authorization: Bearer <x>`` loses ``<x>``.
- **URLs.** In any ``scheme://`` URL the password of the user info and the
  value of every query parameter are masked: signatures hide under names
  nobody can list (``X-Amz-Signature``, ``sig``, ``code``), so every value
  goes. The path and the host stay, so the line still says what was called.
- **Known values.** Strings handed to :func:`scrub` (a worker's own DSN
  password, say) wherever they appear.

It over-redacts rather than under-redacts: ``monkey=3`` loses its ``3``.
Every function is idempotent (redacting twice gives the same text).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MASK",
    "SECRET_WORDS",
    "is_secret_name",
    "redact_text",
    "redact_value",
    "scrub",
    "secret_placeholders",
]

MASK = "***"

#: A field whose name contains one of these (any case) holds a secret.
SECRET_WORDS = (
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "pwd",
    "authorization",
    "credential",
    "cookie",
    "signature",
)

_WORDS = "|".join(SECRET_WORDS)
_SECRET_NAME = re.compile(rf"(?i)(?:{_WORDS})")
#: ``scheme://user:password@host/path?query#fragment`` (up to white space or a quote).
_URL = re.compile(r"""(?i)\b([a-z][a-z0-9+.\-]*://)([^\s"'<>]+)""")
#: ``name=value``, ``name: value``, ``"name": "value"``; the value quoted or bare. Any
#: name matches (possessively: no backtracking into it) and the value is only looked at
#: (a lookahead), so a pair inside the value of a name that holds no secret is found too.
_PAIR = re.compile(
    r"""(?x)
    (?<![\w.\-])(?P<name>[\w.\-]++)
    (?P<sep>["']?\s*+[:=]\s*+)
    (?=(?P<value>
        "(?:[^"\\]|\\.)*+"?
      | '(?:[^'\\]|\\.)*+'?
      | (?i:(?:bearer|basic|token|digest)\s++)?[^\s"',;&}\])]++
    ))
    """
)
#: A name that is an exception or warning class (``KeyError``, ``TokenExpiredError``).
_NOT_A_FIELD = re.compile(r"(?:Error|Exception|Warning)$")
_PLACEHOLDER = re.compile(
    r"%(?P<key>\([^)]*\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(?P<kind>[diouxXeEfFgGcrsa%])"
)


def is_secret_name(name: object) -> bool:
    """Whether a field called ``name`` holds a secret (see the module docstring)."""
    return isinstance(name, str) and _SECRET_NAME.search(name) is not None


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of every known secret in ``text`` (longest first)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with URL passwords and query values, secret pairs and ``secrets`` masked."""
    text = str(text)
    if "://" in text:
        text = _URL.sub(_redact_url, text)
    if _SECRET_NAME.search(text) is not None:
        text = _redact_pairs(text)
    return scrub(text, secrets)


def redact_value(value: Any, secrets: Iterable[str] = (), *, depth: int = 0) -> Any:
    """A copy of ``value`` with secret-named mapping entries masked and strings redacted.

    Mappings, lists and tuples are walked (up to 20 levels; deeper is masked
    whole); other objects are returned as they are (their ``str`` is redacted
    where they are formatted into text).
    """
    if isinstance(value, str):
        return redact_text(value, secrets)
    if depth >= 20:
        return MASK
    if isinstance(value, Mapping):
        return {
            key: MASK if is_secret_name(key) else redact_value(item, secrets, depth=depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        items = [redact_value(item, secrets, depth=depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value


@functools.lru_cache(maxsize=1024)
def secret_placeholders(template: str) -> tuple[int, ...]:
    """The positions of the ``%`` arguments of ``template`` that follow a secret's name.

    ``"login as %s with token %s"`` -> ``(1,)``: the second argument is masked
    before the message is formatted, since text redaction cannot see that
    ``token abc`` is a pair.
    """
    found: list[int] = []
    index = 0
    last = 0
    for match in _PLACEHOLDER.finditer(template):
        if match.group("kind") == "%":
            last = match.end()
            continue
        if _names_a_secret(template[last : match.start()]):
            found.append(index)
        index += 1
        last = match.end()
    return tuple(found)


def _names_a_secret(before: str) -> bool:
    """``"... token: "`` / ``"key='"``: the text ends with a secret's name and separators."""
    end = len(before.rstrip(" \t\"'=:"))
    start = end
    while start > 0 and (before[start - 1].isalnum() or before[start - 1] in "_.-"):
        start -= 1
    return start < end and is_secret_name(before[start:end])


def _redact_url(match: re.Match[str]) -> str:
    scheme, rest = match.group(1), match.group(2)
    # A password may hold "@", "/", "?" or "#" unencoded: the user info ends at the
    # last "@" (as the stores' DSN redaction reads it; an "@" in a path over-redacts).
    at = rest.rfind("@")
    if at != -1:
        userinfo = rest[:at]
        colon = userinfo.find(":")
        if colon != -1:
            rest = userinfo[: colon + 1] + MASK + rest[at:]
    head, mark, tail = rest.partition("?")
    if not mark:
        return scheme + rest
    query, hash_mark, fragment = tail.partition("#")
    masked = "&".join(_mask_parameter(part) for part in query.split("&"))
    return f"{scheme}{head}?{masked}{hash_mark}{fragment}"


def _mask_parameter(part: str) -> str:
    name, equals, _ = part.partition("=")
    return f"{name}={MASK}" if equals else part


def _redact_pairs(text: str) -> str:
    """Mask the value of every pair whose name holds a secret (not an exception type's)."""
    out: list[str] = []
    position = 0
    for match in _PAIR.finditer(text):
        if match.start() < position:
            continue  # inside a value masked already
        name = match.group("name")
        if not is_secret_name(name) or _NOT_A_FIELD.search(name) is not None:
            continue  # ``KeyError: 'x'`` names an exception type; pairs in its value still go
        out.append(text[position : match.start()])
        out.append(name + match.group("sep") + MASK)
        position = match.end("value")
    out.append(text[position:])
    return "".join(out)
