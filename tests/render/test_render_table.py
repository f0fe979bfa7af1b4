"""The task table and the history table, against the seed's real output."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from chongming.errors import ConfigurationError
from chongming.render import display_width, render_history, render_rows, render_table
from chongming.state import Failure, FailureKind, Progress, TaskSnapshot, TaskStatus, Transition

NOW = datetime(2026, 10, 2, 14, 1, 30, tzinfo=UTC)


def snapshot(
    task_id: str,
    label: str,
    status: TaskStatus,
    *,
    ran_for: float | None = None,
    finished: bool = False,
    **fields: Any,
) -> TaskSnapshot:
    """A snapshot whose elapsed time at NOW is ``ran_for`` seconds."""
    started = None if ran_for is None else NOW - timedelta(seconds=ran_for + 1.0)
    finished_at = None
    if ran_for is not None:
        if finished:
            finished_at = NOW - timedelta(seconds=1.0)
        else:
            started = NOW - timedelta(seconds=ran_for)
    base = TaskSnapshot(
        task_id=task_id,
        name="sync",
        label=label,
        status=status,
        status_version=1,
        attempt=0 if started is None else 1,
        max_attempts=1,
        created_at=NOW - timedelta(minutes=1),
        updated_at=NOW,
        started_at=started,
        finished_at=finished_at,
    )
    return dataclasses.replace(base, **fields)


SEED_QUEUEING_VIEW = """\
TASK_ID  NAME    STATUS   ATTEMPT  ELAPSED  PROGRESS  FAILURE
-------  ------  -------  -------  -------  --------  -------
t0       转换-1  running  1/1      0.4s     -         -
t1       转换-2  running  1/1      0.4s     -         -
t2       转换-3  queued   0/1      -        -         -
t3       转换-4  queued   0/1      -        -         -
    active 4 (queued 2, holding a slot 2)"""


def test_seed_queueing_view() -> None:
    snapshots = [
        snapshot("t0", "转换-1", TaskStatus.RUNNING, ran_for=0.4),
        snapshot("t1", "转换-2", TaskStatus.RUNNING, ran_for=0.42),
        snapshot("t2", "转换-3", TaskStatus.QUEUED),
        snapshot("t3", "转换-4", TaskStatus.QUEUED),
    ]
    assert render_table(snapshots, now=NOW) == SEED_QUEUEING_VIEW


SEED_BUCKET_VIEW = """\
TASK_ID  NAME    BUCKET  STATUS     ATTEMPT  ELAPSED  PROGRESS  FAILURE
-------  ------  ------  ---------  -------  -------  --------  -------
a0       A-同步  7       succeeded  1/1      0.4s     -         -
a1       A-同步  7       running    1/1      0.1s     -         -
a2       A-同步  7       queued     0/1      -        -         -
a3       A-同步  7       queued     0/1      -        -         -
b0       B-同步  28      succeeded  1/1      0.4s     -         -
b1       B-同步  28      running    1/1      0.1s     -         -"""


def test_seed_bucket_view() -> None:
    a: dict[str, Any] = {"bucket": 7, "bucket_key": "tenant-A"}
    b: dict[str, Any] = {"bucket": 28, "bucket_key": "tenant-B"}
    snapshots = [
        snapshot("a0", "A-同步", TaskStatus.SUCCEEDED, ran_for=0.4, finished=True, **a),
        snapshot("a1", "A-同步", TaskStatus.RUNNING, ran_for=0.1, **a),
        snapshot("a2", "A-同步", TaskStatus.QUEUED, **a),
        snapshot("a3", "A-同步", TaskStatus.QUEUED, **a),
        snapshot("b0", "B-同步", TaskStatus.SUCCEEDED, ran_for=0.4, finished=True, **b),
        snapshot("b1", "B-同步", TaskStatus.RUNNING, ran_for=0.1, **b),
    ]
    text = render_table(snapshots, now=NOW)
    assert text == SEED_BUCKET_VIEW + "\n    active 4 (queued 2, holding a slot 2)"
    assert render_table(snapshots, now=NOW, summary=False) == SEED_BUCKET_VIEW


SEED_PROGRESS_VIEW = """\
TASK_ID                 NAME                 STATUS     ATTEMPT  ELAPSED  PROGRESS  FAILURE
----------------------  -------------------  ---------  -------  -------  --------  -------
2b4e5e326776:extract    daily-etl/extract    succeeded  1/2      0.3s     6/6       -
2b4e5e326776:transform  daily-etl/transform  succeeded  1/1      0.3s     6/6       -
2b4e5e326776:load       daily-etl/load       succeeded  1/1      0.2s     4/4       -"""


def test_seed_progress_view() -> None:
    rows = [("extract", 2, 0.3, 6), ("transform", 1, 0.3, 6), ("load", 1, 0.2, 4)]
    snapshots = [
        snapshot(
            f"2b4e5e326776:{node}",
            f"daily-etl/{node}",
            TaskStatus.SUCCEEDED,
            ran_for=elapsed,
            finished=True,
            max_attempts=max_attempts,
            progress=Progress(done=done, total=done),
        )
        for node, max_attempts, elapsed, done in rows
    ]
    assert render_table(snapshots, now=NOW, summary=False) == SEED_PROGRESS_VIEW


def test_bucket_column_forced_on_and_off() -> None:
    plain = [snapshot("t0", "x", TaskStatus.QUEUED)]
    forced = render_table(plain, now=NOW, show_bucket=True, summary=False)
    assert forced.splitlines()[0].split() == [
        "TASK_ID",
        "NAME",
        "BUCKET",
        "STATUS",
        "ATTEMPT",
        "ELAPSED",
        "PROGRESS",
        "FAILURE",
    ]
    assert forced.splitlines()[2].split()[2] == "-"
    bucketed = [snapshot("t0", "x", TaskStatus.QUEUED, bucket=3)]
    hidden = render_table(bucketed, now=NOW, show_bucket=False, summary=False)
    assert "BUCKET" not in hidden


def test_label_falls_back_to_name_and_failure_kind_shown() -> None:
    failed = snapshot(
        "f1",
        "",
        TaskStatus.FAILED,
        ran_for=2.25,
        finished=True,
        failure=Failure(kind=FailureKind.TIMEOUT_ATTEMPT, message="too slow"),
        progress=Progress(done=3, total=10, unit="rows"),
    )
    line = render_table([failed], now=NOW, summary=False).splitlines()[2]
    assert line.split()[:2] == ["f1", "sync"]
    assert "2.2s" in line or "2.3s" in line
    assert "3/10 rows" in line
    assert line.endswith("timeout_attempt")


def test_summary_counts_paused_as_holding_a_slot() -> None:
    snapshots = [
        snapshot("p", "", TaskStatus.PAUSED, ran_for=1.0),
        snapshot("s", "", TaskStatus.STOPPING, ran_for=1.0),
        snapshot("r", "", TaskStatus.RETRY_WAIT, ran_for=1.0),
        snapshot("b", "", TaskStatus.BLOCKED),
        snapshot("q", "", TaskStatus.QUEUED),
        snapshot("d", "", TaskStatus.LOST, ran_for=1.0, finished=True),
    ]
    last = render_table(snapshots, now=NOW).splitlines()[-1]
    assert last == "    active 5 (queued 1, holding a slot 2)"


def test_empty_table() -> None:
    assert render_table([], now=NOW).splitlines() == [
        "TASK_ID  NAME  STATUS  ATTEMPT  ELAPSED  PROGRESS  FAILURE",
        "-------  ----  ------  -------  -------  --------  -------",
        "    active 0 (queued 0, holding a slot 0)",
    ]


SEED_HISTORY = """\
VER  FROM      TO        AT                         TRIGGER                             ACTOR   REASON
---  --------  --------  -------------------------  ----------------------------------  ------  --------
1    pending   queued    2026-10-02T14:01:23+00:00  orchestrator:dependencies_resolved  system  -
2    queued    starting  2026-10-02T14:01:23+00:00  scheduler:dispatch                  system  -
3    starting  running   2026-10-02T14:01:23+00:00  executor:launched                   system  -
4    running   pausing   2026-10-02T14:01:40+00:00  user:pause                          user    -
5    pausing   paused    2026-10-02T14:01:40+00:00  runtime:pause_reached               system  -
6    paused    running   2026-10-02T14:01:42+00:00  user:resume                         user    -
7    running   stopping  2026-10-02T14:01:44+00:00  user:stop                           user    发布窗口
8    stopping  stopped   2026-10-02T14:01:44+00:00  runtime:stop_confirmed              system  发布窗口"""  # noqa: E501 (the seed's exact lines)


def test_seed_history() -> None:
    """The seed's `history demo-1` table.

    One deliberate difference: the seed underlines REASON with 6 dashes, the
    width of the header, although 发布窗口 takes 8 cells. Every other seed
    table counts wide characters, so the underline here does too.
    """
    steps = [
        ("pending", "queued", 23, "orchestrator:dependencies_resolved", "system", None),
        ("queued", "starting", 23, "scheduler:dispatch", "system", None),
        ("starting", "running", 23, "executor:launched", "system", None),
        ("running", "pausing", 40, "user:pause", "user", None),
        ("pausing", "paused", 40, "runtime:pause_reached", "system", None),
        ("paused", "running", 42, "user:resume", "user", None),
        ("running", "stopping", 44, "user:stop", "user", "发布窗口"),
        ("stopping", "stopped", 44, "runtime:stop_confirmed", "system", "发布窗口"),
    ]
    transitions = [
        Transition(
            task_id="demo-1",
            version=version,
            from_status=TaskStatus(source),
            to_status=TaskStatus(target),
            at=datetime(2026, 10, 2, 14, 1, second, 123456, tzinfo=UTC),
            trigger=trigger,
            actor=actor,
            reason=reason,
            attempt=1,
        )
        for version, (source, target, second, trigger, actor, reason) in enumerate(steps, 1)
    ]
    assert render_history(transitions) == SEED_HISTORY


def test_history_time_is_shown_in_utc() -> None:
    beijing = timezone(timedelta(hours=8))
    common: dict[str, Any] = {"task_id": "x", "trigger": "user:stop", "attempt": 1}
    transitions = [
        Transition(
            version=1,
            from_status=TaskStatus.RUNNING,
            to_status=TaskStatus.STOPPING,
            at=datetime(2026, 10, 2, 22, 1, 23, tzinfo=beijing),
            **common,
        ),
        Transition(
            version=2,
            from_status=TaskStatus.STOPPING,
            to_status=TaskStatus.STOPPED,
            at=datetime(2026, 10, 2, 14, 1, 24),  # naive: already UTC
            **common,
        ),
    ]
    lines = render_history(transitions).splitlines()
    assert "2026-10-02T14:01:23+00:00" in lines[2]
    assert "2026-10-02T14:01:24+00:00" in lines[3]


def test_render_rows_aligns_wide_characters() -> None:
    text = render_rows(["A", "B", "C"], [["中文字", "x", "end"], ["ab", "一二三四", "end"]])
    lines = text.splitlines()
    # Every "C"-column cell starts at the same terminal cell.
    starts = {display_width(line[: line.rindex("  ") + 2]) for line in lines}
    assert starts == {display_width("一二三四") + 2 + display_width("中文字") + 2}
    assert not any(line.endswith(" ") for line in lines)


def test_render_rows_rejects_ragged_rows() -> None:
    with pytest.raises(ConfigurationError, match="row 1 has 1 cells, expected 2"):
        render_rows(["A", "B"], [["1", "2"], ["3"]])
