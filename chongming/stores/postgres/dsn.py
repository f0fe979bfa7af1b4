"""Connection strings: parsing into driver arguments, and redaction of passwords.

A DSN is a secret-bearing string that ends up in error messages, reprs and
logs unless every path removes the password. Two layers do that:

- :func:`redact_dsn` rewrites a DSN of any form (URL userinfo, ``?password=``,
  libpq keyword form, passwords holding ``@`` / ``#`` / ``'``, percent-encoded)
  so that the password is replaced by ``***``. It over-redacts rather than
  under-redacts when the DSN is malformed.
- :func:`scrub` removes every known spelling of the password (raw,
  percent-encoded, decoded) from arbitrary text, because driver messages can
  quote a fragment of the DSN they failed to parse.

Pure functions: no driver, no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from chongming.errors import ConfigurationError

__all__ = ["ConnectTarget", "parse_dsn", "redact_dsn", "redact_text", "scrub"]

MASK = "***"

_URL_SCHEMES = ("postgresql://", "postgres://")
# ``password=`` inside a URL query: up to the next ``&`` (``#`` included on purpose).
_QUERY_PASSWORD = re.compile(r"(?i)([?&]\w*password=)[^&]*")
# libpq keyword form: ``password = 'quoted \' value'`` or ``password=bare``.
_KEYWORD_PASSWORD = re.compile(r"""(?i)(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)""")
_EMBEDDED_URL = re.compile(r"(?i)postgres(?:ql)?://\S+")
_KEYWORD_PAIR = re.compile(r"""\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)\s*""")

# libpq keyword -> asyncpg.connect() keyword.
_KEYWORDS = {
    "host": "host",
    "hostaddr": "host",
    "port": "port",
    "user": "user",
    "password": "password",
    "dbname": "database",
    "sslmode": "ssl",
    "passfile": "passfile",
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConnectTarget:
    """What to hand to the driver, plus what must never be shown."""

    dsn: str | None
    kwargs: Mapping[str, Any]
    redacted: str
    secrets: frozenset[str]
    connect_timeout: float | None = None


def redact_dsn(dsn: str) -> str:
    """Return ``dsn`` with its password replaced by ``***``, whatever its form."""
    text = str(dsn)
    if text.lower().startswith(_URL_SCHEMES):
        return _redact_url(text)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Remove every spelling of every secret from ``text`` (longest first)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Redact DSNs embedded in free text, then every known spelling of the secrets."""
    text = _EMBEDDED_URL.sub(lambda m: _redact_url(m.group(0)), str(text))
    text = _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    return scrub(text, secrets)


def parse_dsn(dsn: str, *, password: str | None = None) -> ConnectTarget:
    """Turn a URL or keyword DSN into driver arguments; errors are redacted.

    URL DSNs go to asyncpg as they are (it parses them); keyword DSNs are
    translated here because asyncpg only accepts the URL form.
    """
    if not isinstance(dsn, str) or not dsn.strip():
        raise ConfigurationError("PostgreSQL DSN must be a non-empty string")
    redacted = redact_dsn(dsn)
    secrets = set(_secret_spellings(password))
    if dsn.lower().startswith(_URL_SCHEMES):
        secrets.update(_url_secrets(dsn))
        timeout = _url_connect_timeout(dsn, redacted)
        kwargs: dict[str, Any] = {}
        if password is not None:
            kwargs["password"] = password
        return ConnectTarget(
            dsn=_encode_userinfo_at(_strip_query_key(dsn, "connect_timeout")),
            kwargs=kwargs,
            redacted=redacted,
            secrets=frozenset(secrets),
            connect_timeout=timeout,
        )
    if "=" not in dsn:
        raise ConfigurationError(
            f"malformed PostgreSQL DSN {redacted!r}: expected postgresql://... or key=value pairs"
        )
    kwargs = {}
    timeout = None
    position = 0
    text = dsn.strip()
    while position < len(text):
        match = _KEYWORD_PAIR.match(text, position)
        if match is None or match.end() == position:
            raise ConfigurationError(f"malformed PostgreSQL DSN {redacted!r}")
        key, raw = match.group(1).lower(), match.group(2)
        value = _unquote_keyword(raw)
        position = match.end()
        if key.endswith("password"):
            secrets.update(_secret_spellings(value))
            secrets.update(_secret_spellings(raw))
        if key == "connect_timeout":
            timeout = _number(value, redacted)
        elif key == "application_name":
            continue  # the store sets its own, so connections stay countable
        elif key in _KEYWORDS:
            kwargs[_KEYWORDS[key]] = int(_number(value, redacted)) if key == "port" else value
        else:
            raise ConfigurationError(
                f"PostgreSQL DSN {redacted!r}: keyword {key!r} is not supported"
            )
    if password is not None:
        kwargs["password"] = password
    return ConnectTarget(
        dsn=None,
        kwargs=kwargs,
        redacted=redacted,
        secrets=frozenset(secrets),
        connect_timeout=timeout,
    )


def _redact_url(text: str) -> str:
    scheme_end = text.index("://") + 3
    rest = text[scheme_end:]
    # The userinfo ends at the last "@" (a password may contain "@", "/", "#"
    # or "?" unencoded). Everything between the first ":" and that "@" goes.
    at = rest.rfind("@")
    if at != -1:
        userinfo = rest[:at]
        colon = userinfo.find(":")
        if colon != -1:
            rest = userinfo[:colon] + ":" + MASK + rest[at:]
    return text[:scheme_end] + _QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, rest)


def _encode_userinfo_at(dsn: str) -> str:
    """Percent-encode an ``@`` inside the user info (the last ``@`` ends it).

    asyncpg splits at the first ``@``, which would turn the rest of such a
    password into a host name (and log it while resolving it).
    """
    scheme, _, rest = dsn.partition("://")
    authority, slash, tail = rest.partition("/")
    if authority.count("@") < 2:
        return dsn
    userinfo, _, host = authority.rpartition("@")
    return f"{scheme}://{userinfo.replace('@', '%40')}@{host}{slash}{tail}"


def _url_secrets(text: str) -> set[str]:
    rest = text[text.index("://") + 3 :]
    found: set[str] = set()
    at = rest.rfind("@")
    if at != -1:
        userinfo = rest[:at]
        colon = userinfo.find(":")
        if colon != -1:
            found.update(_secret_spellings(userinfo[colon + 1 :]))
            # A password holding "@" may be cut anywhere by other parsers.
            for piece in userinfo[colon + 1 :].split("@"):
                if len(piece) >= 4:
                    found.update(_secret_spellings(piece))
    for match in _QUERY_PASSWORD.finditer(rest):
        value = match.group(0).split("=", 1)[1]
        found.update(_secret_spellings(value))
        for piece in value.split("#"):
            if len(piece) >= 4:
                found.update(_secret_spellings(piece))
    return found


def _secret_spellings(value: str | None) -> Iterable[str]:
    if not value:
        return ()
    spellings = {value, quote(value, safe=""), quote_plus(value, safe="")}
    for decoded in (unquote(value), unquote_plus(value)):
        spellings.update({decoded, quote(decoded, safe=""), quote_plus(decoded, safe="")})
    return {s for s in spellings if s}


def _url_connect_timeout(dsn: str, redacted: str) -> float | None:
    match = re.search(r"[?&]connect_timeout=([^&#]*)", dsn)
    return None if match is None else _number(unquote(match.group(1)), redacted)


def _strip_query_key(dsn: str, key: str) -> str:
    # asyncpg rejects connect_timeout in the URL; the store applies it itself.
    stripped = re.sub(rf"([?&]){key}=[^&#]*&?", r"\1", dsn)
    return stripped.rstrip("?&")


def _unquote_keyword(raw: str) -> str:
    if len(raw) >= 2 and raw.startswith("'") and raw.endswith("'"):
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


def _number(value: str, redacted: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ConfigurationError(
            f"PostgreSQL DSN {redacted!r}: {value!r} is not a number"
        ) from None
