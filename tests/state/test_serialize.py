from __future__ import annotations

import json
from datetime import UTC, datetime

from chongming import (
    Failure,
    FailureKind,
    Progress,
    TaskSnapshot,
    TaskStatus,
    Transition,
    snapshot_to_json,
    transition_to_json,
)

AT = datetime(2026, 10, 2, 14, 1, 23, tzinfo=UTC)


def test_snapshot_to_json_is_json_with_every_field() -> None:
    snapshot = TaskSnapshot(
        task_id="job-1",
        name="extract",
        label="抽取",
        status=TaskStatus.FAILED,
        status_version=5,
        attempt=2,
        max_attempts=3,
        created_at=AT,
        updated_at=AT,
        bucket=7,
        bucket_key="tenant-A",
        tags=frozenset({"io", "etl"}),
        progress=Progress(done=3, total=6, unit="files"),
        failure=Failure(kind=FailureKind.TIMEOUT_IDLE, message="stalled", retryable=True),
        args=("2026-10-02",),
    )
    data = json.loads(json.dumps(snapshot_to_json(snapshot), allow_nan=False))
    assert set(data) == set(TaskSnapshot.__dataclass_fields__)
    assert data["status"] == "failed"
    assert data["tags"] == ["etl", "io"]
    assert data["created_at"] == "2026-10-02T14:01:23+00:00"
    assert data["failure"] == {
        "kind": "timeout_idle",
        "message": "stalled",
        "exception_type": None,
        "retryable": True,
    }
    assert data["progress"]["unit"] == "files"


def test_transition_to_json() -> None:
    transition = Transition(
        task_id="job-1",
        version=7,
        from_status=TaskStatus.RUNNING,
        to_status=TaskStatus.STOPPING,
        at=AT,
        trigger="user:stop",
        actor="user",
        reason="发布窗口",
        attempt=1,
    )
    assert transition_to_json(transition) == {
        "task_id": "job-1",
        "version": 7,
        "from": "running",
        "to": "stopping",
        "at": "2026-10-02T14:01:23+00:00",
        "trigger": "user:stop",
        "actor": "user",
        "reason": "发布窗口",
        "attempt": 1,
    }
