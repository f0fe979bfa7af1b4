"""The wire between a :class:`ProcessExecutor` and its workers: length-prefixed JSON.

JSON, never pickle, in both directions: what crosses is a registered target's
name (module and qualified name), JSON arguments, JSON results and small
control messages. Decoding a frame can never run code, so neither side trusts
the other with more than data (reliability promise P8).

A frame is a 4-byte big-endian length and that many bytes of ASCII JSON (an
array whose first item names the message). The messages:

parent -> child
    ``["run", seq, job]``, ``["control", seq, stop, pause, generation]``,
    ``["close"]``
child -> parent
    ``["ready", pid]``, ``["beat", seq, age]``,
    ``["progress", seq, done, total, unit, message]``, ``["log", seq, record]``,
    ``["paused", seq, generation]``, ``["result", seq, value]``,
    ``["error", seq, error]``, ``["invalid", seq, type_name, reason]``,
    ``["launch_error", seq, message]``

``seq`` numbers the jobs a worker ran; a message about another job than the
current one is stale and dropped.
"""

from __future__ import annotations

import json
import signal
import struct
from typing import Any

__all__ = ["MAX_FRAME", "FrameReader", "ProtocolError", "describe_exit", "encode"]

_HEADER = struct.Struct(">I")
#: A frame larger than this is a broken stream, not a message (results are capped far below).
MAX_FRAME = 1 << 30
_dumps = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode
_loads = json.loads


class ProtocolError(Exception):
    """The byte stream from the other side is not a sequence of valid frames."""


def encode(message: list[Any]) -> bytes:
    """One frame. Raises ``TypeError``/``ValueError`` for what JSON cannot hold."""
    body = _dumps(message).encode("ascii")
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Turns bytes as they arrive into whole messages (a frame may span reads)."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[list[Any]]:
        buffer = self._buffer
        buffer += data
        messages: list[list[Any]] = []
        offset = 0
        size = len(buffer)
        while size - offset >= 4:
            (length,) = _HEADER.unpack_from(buffer, offset)
            if length > MAX_FRAME:
                raise ProtocolError(f"a frame of {length} bytes")
            end = offset + 4 + length
            if end > size:
                break
            try:
                message = _loads(buffer[offset + 4 : end])
            except ValueError as error:
                raise ProtocolError(f"a frame that is not JSON: {error}") from None
            if not isinstance(message, list) or not message or not isinstance(message[0], str):
                raise ProtocolError(f"a frame that is not a message: {message!r:.80}")
            messages.append(message)
            offset = end
        if offset:
            del buffer[:offset]
        return messages

    @property
    def pending(self) -> int:
        """Bytes of a frame not complete yet."""
        return len(self._buffer)


def describe_exit(exitcode: int | None, *, killed_by_parent: bool = False) -> str:
    """How a process ended, for a failure message: ``was killed by signal SIGSEGV (11)``."""
    if exitcode is None:
        return "ended with an unknown exit status"
    if exitcode >= 0:
        return f"exited with code {exitcode}"
    number = -exitcode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "an unknown signal"
    text = f"was killed by signal {name} ({number})"
    if number == signal.SIGKILL and not killed_by_parent:
        text += ", sent from outside it (the kernel's out-of-memory killer sends this one)"
    return text
