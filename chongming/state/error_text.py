"""Text the runtime stores about errors, made safe where it is made.

Shared by the run, the control plane and pipelines (below all three).
"""

from __future__ import annotations

__all__ = ["describe_error", "error_message", "storable_text"]


def error_message(error: BaseException) -> str:
    """``str(error)``, at most 2,000 characters, safe to store (even if ``__str__`` raises)."""
    try:
        text = str(error)
    except Exception as broken:  # a __str__ that raises must not strand the run
        text = f"<{type(error).__name__}: str() raised {type(broken).__name__}>"
    text = text if len(text) <= 2000 else text[:2000] + "…"
    return storable_text(text)


def describe_error(error: BaseException) -> str:
    """``Type: message`` of any exception, safe to store (even if its ``__str__`` raises)."""
    return f"{storable_text(type(error).__name__)}: {error_message(error)}"


def storable_text(text: str) -> str:
    """``text`` with what no store can hold escaped: NUL and lone surrogates.

    Exception messages are made by code we do not control (a surrogate-escaped
    file name is enough), so they are made safe where the runtime creates the
    record, never refused later by a store.
    """
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
