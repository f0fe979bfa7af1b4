"""Safe by default: loopback binds, tokens, CSRF, and headers that forbid what pages never need.

- **Token.** With a token configured every request but ``/login`` and the
  static assets must carry it: the ``chongming_dashboard`` cookie that
  ``/login`` sets (HttpOnly, SameSite=Strict), or ``Authorization: Bearer``
  for scripts and Prometheus. Compared in constant time.
- **CSRF.** Every state-changing request (``POST``) must carry the app's
  CSRF token in its form; a page of another site can neither read it (same
  origin policy) nor send the cookie (SameSite=Strict). A random secret per
  app, so a restart invalidates old forms.
- **Hosts (DNS rebinding).** A page of another site whose name was made to
  resolve to 127.0.0.1 reaches the dashboard with its own name in ``Host``.
  Every request's ``Host`` must be on the allow-list: the loopback names
  (``localhost``, ``127.0.0.0/8``, ``::1``) plus the names given
  (``allowed_hosts`` / ``--allowed-host``; ``*`` allows any). Without a list
  a dashboard with a token allows any host (the rebinding page never has
  the token); one without a token allows only loopback names.
- **Origin.** Every state-changing request (``POST``) must come from the
  dashboard's own pages: its ``Origin`` (else its ``Referer``) must name the
  request's own host. A request that carries neither is refused unless it
  authenticates with ``Authorization: Bearer`` (a script, not a browser).
- **Headers.** A Content-Security-Policy that allows only the app's own
  script and stylesheet (no inline script runs even if escaping failed), no
  framing, referrers only to the dashboard itself (``same-origin``: so a
  form's ``Origin`` is sent), no sniffing, no caching of pages.
- **Binding.** :func:`check_bind` refuses a non-loopback address without a
  token, before any socket is opened.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "COOKIE",
    "SECURITY_HEADERS",
    "TOKEN_ENV",
    "Guard",
    "InsecureBind",
    "allowed_hosts_for",
    "check_bind",
    "host_allowed",
    "is_loopback",
    "load_token",
    "origin_matches",
]

COOKIE = "chongming_dashboard"
TOKEN_ENV = "CHONGMING_DASHBOARD_TOKEN"
_MIN_TOKEN = 16

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class InsecureBind(ValueError):
    """A non-loopback bind without a token: anyone on the network could stop tasks."""


def is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` and ``localhost`` are loopback; anything else is not."""
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def host_allowed(host_header: str | None, allowed: frozenset[str] | None) -> bool:
    """Whether a request's ``Host`` is on the allow-list (``None``: any host; see above).

    The port is ignored; names compare case-insensitively; loopback names
    are always allowed. A request without a ``Host`` is refused.
    """
    if allowed is None:
        return True
    name = _host_name(host_header)
    if name is None:
        return False
    return "*" in allowed or is_loopback(name) or name in allowed


def origin_matches(host_header: str | None, origin: str | None, referer: str | None) -> bool:
    """Whether ``Origin`` (else ``Referer``) names the request's own host and port.

    ``Origin: null`` (an opaque or cross-site origin under our referrer
    policy) never matches; neither does a request that sends neither header.
    """
    claimed = origin if origin is not None else referer
    if not claimed or not host_header or claimed.strip().lower() == "null":
        return False
    try:
        parts = urlsplit(claimed.strip())
        netloc = parts.netloc.lower()
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not netloc:
        return False
    return _with_port(netloc, parts.scheme) == _with_port(host_header.strip().lower(), parts.scheme)


def allowed_hosts_for(given: Collection[str] | None, token: str | None) -> frozenset[str] | None:
    """The allow-list a dashboard enforces: ``None`` (any) for a token without a list."""
    if given is None:
        return None if token is not None else frozenset()
    if isinstance(given, str):
        raise ValueError("allowed_hosts is a collection of host names, not one string")
    names = set()
    for name in given:
        cleaned = _host_name(name) if name != "*" else "*"
        if not cleaned:
            raise ValueError(f"allowed host {name!r} is not a host name")
        names.add(cleaned)
    return frozenset(names)


def _host_name(value: str | None) -> str | None:
    """``Host: Example.com:8000`` -> ``example.com``; ``[::1]:8000`` -> ``::1``."""
    if value is None:
        return None
    text = value.strip().lower()
    if not text or any(c in text for c in "/@?# \t\\"):
        return None
    if text.startswith("["):
        end = text.find("]")
        return text[1:end] if end > 1 else None
    if text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".") or None


def _with_port(netloc: str, scheme: str) -> str:
    """``host`` -> ``host:80`` (or 443): ``Origin`` omits a default port, ``Host`` may not."""
    if netloc.endswith("]") or ":" not in netloc.rsplit("]", 1)[-1]:
        return f"{netloc}:{443 if scheme == 'https' else 80}"
    return netloc


def load_token(token_file: str | os.PathLike[str] | None = None) -> str | None:
    """The token from ``token_file`` (first line) or else ``$CHONGMING_DASHBOARD_TOKEN``."""
    if token_file is not None:
        text = Path(token_file).read_text(encoding="utf-8").strip()
        if not text:
            raise ValueError(f"the token file {os.fspath(token_file)!r} is empty")
        token: str | None = text.splitlines()[0].strip()
    else:
        token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token is not None and len(token) < _MIN_TOKEN:
        raise ValueError(f"the dashboard token must be at least {_MIN_TOKEN} characters")
    return token


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token."""
    if token is None and not is_loopback(host):
        raise InsecureBind(
            f"refusing to serve the dashboard on {host!r} without a token: anyone who can "
            f"reach it could stop tasks. Set {TOKEN_ENV} or pass --token-file, or bind to "
            "127.0.0.1"
        )


class Guard:
    """The token (if any) and the CSRF secret of one app."""

    __slots__ = ("_session", "_token", "allowed_hosts", "csrf")

    def __init__(self, token: str | None, allowed_hosts: Collection[str] | None = None) -> None:
        if token is not None and (not isinstance(token, str) or len(token) < _MIN_TOKEN):
            raise ValueError(f"the dashboard token must be a string of >= {_MIN_TOKEN} characters")
        self._token = token
        #: The ``Host`` allow-list (``None``: any host); see the module docstring.
        self.allowed_hosts = allowed_hosts_for(allowed_hosts, token)
        secret = secrets.token_bytes(32)
        self.csrf = hmac.new(secret, b"chongming-dashboard-csrf", hashlib.sha256).hexdigest()
        # The cookie proves the token without being it, and dies with this app.
        self._session = (
            None
            if token is None
            else hmac.new(secret, token.encode("utf-8"), hashlib.sha256).hexdigest()
        )

    @property
    def token_required(self) -> bool:
        return self._token is not None

    def authorized(self, cookie: str | None, authorization: str | None) -> bool:
        token = self._token
        if token is None:
            return True
        if authorization and authorization.lower().startswith("bearer "):
            return self.token_matches(authorization[7:].strip())
        session = self._session
        return cookie is not None and session is not None and _same(cookie, session)

    def token_matches(self, offered: str) -> bool:
        token = self._token
        if token is None:
            return False
        return _same(offered, token)

    def csrf_ok(self, offered: str | None) -> bool:
        return offered is not None and _same(offered, self.csrf)

    def session_cookie(self) -> str:
        """The cookie ``/login`` sets once the token was given (HttpOnly, SameSite=Strict)."""
        assert self._session is not None
        return self._session


def _same(offered: str, expected: str) -> bool:
    return hmac.compare_digest(offered.encode("utf-8"), expected.encode("utf-8"))
