"""The wire and the child's end of it, without a process: frames, coalescing, early stops."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chongming.executors.process.child import SEND_EVERY, ChildContext, ChildLink
from chongming.executors.process.protocol import (
    FrameReader,
    ProtocolError,
    describe_exit,
    encode,
)
from chongming.state.records import Progress
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import AttemptSignals, CarrierKind


def _child(link: ChildLink, carrier: CarrierKind) -> ChildContext:
    return ChildContext(
        link, carrier, task_id="t", name="n", attempt=1, artifact_root=Path("."), upstream=None
    )


def test_frames_survive_any_split() -> None:
    data = encode(["run", 1, {"args": ["中文", 2.5, None]}]) + encode(["close"])
    for cut in range(len(data) + 1):
        reader = FrameReader()
        messages = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert messages == [["run", 1, {"args": ["中文", 2.5, None]}], ["close"]]
        assert reader.pending == 0


@pytest.mark.parametrize(
    "frame",
    [
        b"\xff\xff\xff\xff",  # a length no frame may have
        len(b"not json").to_bytes(4, "big") + b"not json",
        len(b'{"a": 1}').to_bytes(4, "big") + b'{"a": 1}',  # JSON, but not a message
    ],
)
def test_a_broken_stream_is_a_protocol_error(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        FrameReader().feed(frame)


def test_frames_are_json_never_pickle() -> None:
    frame = encode(["result", 3, {"x": [1, 2]}])
    assert json.loads(frame[4:]) == ["result", 3, {"x": [1, 2]}]
    with pytest.raises(TypeError):
        encode(["result", 3, {1, 2}])
    with pytest.raises(ValueError):
        encode(["result", 3, float("nan")])


def test_exits_are_described_with_code_or_signal() -> None:
    assert describe_exit(137) == "exited with code 137"
    assert describe_exit(-signal.SIGSEGV) == "was killed by signal SIGSEGV (11)"
    assert "out-of-memory killer" in describe_exit(-signal.SIGKILL)
    assert "out-of-memory" not in describe_exit(-signal.SIGKILL, killed_by_parent=True)
    assert describe_exit(None) == "ended with an unknown exit status"


@pytest.fixture
def pipe() -> Iterator[tuple[socket.socket, ChildLink]]:
    parent, child = socket.socketpair()
    with parent, child:
        parent.settimeout(5)
        link = ChildLink(child)
        yield parent, link
        link.close()


def received(parent: socket.socket, reader: FrameReader, count: int) -> list[list[object]]:
    messages: list[list[object]] = []
    while len(messages) < count:
        messages += reader.feed(parent.recv(65536))
    return messages


def test_a_stop_read_together_with_its_run_message_is_not_lost(
    pipe: tuple[socket.socket, ChildLink],
) -> None:
    parent, link = pipe
    parent.sendall(encode(["run", 7, {}]) + encode(["control", 7, True, False, 0]))
    assert link.next_message() == ["run", 7, {}]
    signals = _child(link, CarrierKind.THREAD)
    assert signals.stop_requested is False
    link.begin(7, signals)
    assert signals.stop_requested is True


def test_a_stale_control_message_is_dropped(pipe: tuple[socket.socket, ChildLink]) -> None:
    parent, link = pipe
    signals = _child(link, CarrierKind.THREAD)
    link.begin(8, signals)
    parent.sendall(encode(["control", 7, True, False, 0]))  # for the job before
    time.sleep(0.01)
    link.poll()
    assert signals.stop_requested is False


def test_progress_is_coalesced_and_the_last_one_arrives(
    pipe: tuple[socket.socket, ChildLink],
) -> None:
    parent, link = pipe
    signals = _child(link, CarrierKind.THREAD)
    link.begin(1, signals)
    for done in range(1, 101):
        link.progress(Progress(done=done, total=100))
    messages = received(parent, FrameReader(), 1)
    while messages[-1][2] != 100:  # the flusher sends the last one after SEND_EVERY
        messages += received(parent, FrameReader(), 1)
    assert len(messages) <= 3  # 100 reports, at most a few messages
    assert messages[-1] == ["progress", 1, 100, 100, None, None]


def test_a_checkpoint_sends_the_heartbeat_with_its_age(
    pipe: tuple[socket.socket, ChildLink],
) -> None:
    parent, link = pipe
    signals = _child(link, CarrierKind.THREAD)
    link.begin(1, signals)
    time.sleep(SEND_EVERY * 2)
    signals.beat()
    [message] = received(parent, FrameReader(), 1)
    assert message[:2] == ["beat", 1]
    assert 0.0 <= float(message[2]) < 1.0  # type: ignore[arg-type]


def test_the_end_of_a_job_sends_pending_progress_first(
    pipe: tuple[socket.socket, ChildLink],
) -> None:
    parent, link = pipe
    signals = _child(link, CarrierKind.THREAD)
    link.begin(1, signals)
    link.progress(Progress(done=1))
    link.progress(Progress(done=2))  # within SEND_EVERY: pending
    link.finish(encode(["result", 1, "ok"]))
    messages = received(parent, FrameReader(), 2)
    assert messages[-2:] == [["progress", 1, 2, None, None, None], ["result", 1, "ok"]]


def test_a_closed_parent_means_stop(pipe: tuple[socket.socket, ChildLink]) -> None:
    parent, link = pipe
    signals = _child(link, CarrierKind.THREAD)
    link.begin(1, signals)
    parent.close()
    time.sleep(0.01)
    assert signals.stop_requested is True
    assert link.closed
    assert link.next_message() is None


def test_the_child_control_block_sets_every_field_of_the_parents(
    pipe: tuple[socket.socket, ChildLink],
) -> None:
    """ChildContext skips the loop-bound constructor: a new field must be set there too."""
    _, link = pipe
    signals = _child(link, CarrierKind.COROUTINE)
    fields = (*AttemptSignals.__slots__, *TaskContext.__slots__, *ChildContext.__slots__)
    unset = [name for name in fields if not hasattr(signals, name)]
    assert unset == ["_loop"]  # the one thing a worker has none of
