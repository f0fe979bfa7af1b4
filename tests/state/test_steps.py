"""``steps_for``: what an attempt's end writes, decided without a loop.

Every answer is a legal walk through the table from the status it was given,
ends where its follow-up needs it, and says only what the facts say.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chongming.clock import to_datetime
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.state.steps import RELEASED_WHILE_PAUSED, End, Then, asks_retry, steps_for
from chongming.state.table import TRANSITIONS
from chongming.state.triggers import Trigger

#: The statuses an attempt can end in (``paused`` releases the pause first).
LIVE = [TaskStatus.STARTING, TaskStatus.RUNNING, TaskStatus.PAUSING, TaskStatus.STOPPING]
texts = st.none() | st.text(max_size=8)


def _snapshot(status: TaskStatus) -> TaskSnapshot:
    at = to_datetime(1_790_000_000.0)
    return TaskSnapshot(
        task_id="t",
        name="n",
        label="n",
        status=status,
        status_version=3,
        attempt=1,
        max_attempts=3,
        created_at=at,
        updated_at=at,
    )


@given(
    status=st.sampled_from(LIVE),
    end=st.sampled_from(list(End)),
    retry=st.none() | st.booleans(),
    stop_reason=texts,
    note=texts,
    handing_back=texts,
    gives_back=st.booleans(),
    message=st.text(max_size=300),
)
def test_every_answer_is_a_legal_walk_to_where_its_follow_up_starts(
    status: TaskStatus,
    end: End,
    retry: bool | None,
    stop_reason: str | None,
    note: str | None,
    handing_back: str | None,
    gives_back: bool,
    message: str,
) -> None:
    if status is TaskStatus.STARTING and end is End.SUCCEEDED:
        return  # a success means the function ran: the run is past starting
    if not asks_retry(status, end):
        retry = None  # the policy is not asked: the run passes no answer
    moves, then = steps_for(
        status,
        end,
        retry=retry,
        stop_reason=stop_reason,
        note=note,
        handing_back=handing_back,
        gives_back=gives_back,
        failure_message=message,
    )
    snapshot = _snapshot(status)
    for target, trigger, reason in moves:
        assert target in TRANSITIONS[snapshot.status]
        snapshot, _ = apply_transition(
            snapshot, target, trigger=trigger, at=snapshot.updated_at, reason=reason
        )
    final = snapshot.status
    if then is Then.NOTHING:
        assert final.is_terminal
    elif then in (Then.RETRY_LATER, Then.GIVE_BACK):
        assert final is TaskStatus.RETRY_WAIT
        assert retry is True
        assert status is not TaskStatus.STOPPING
        assert (then is Then.GIVE_BACK) is gives_back
        assert moves[-1].reason == message[:200]
    else:  # the follow-up writes its own transitions
        assert moves == ()
        assert then is (Then.PARK if end is End.PARKED else Then.HAND_BACK)
    # What each end may become, and nothing else.
    if end is End.SUCCEEDED:
        assert final is TaskStatus.SUCCEEDED
    elif end is End.STOPPED:
        assert final is TaskStatus.STOPPED or then is Then.HAND_BACK
        if then is Then.HAND_BACK:
            assert handing_back is not None
            assert status is not TaskStatus.STOPPING
    elif end is End.LOST:
        assert final is TaskStatus.LOST
        abandoned_by_stop = status is TaskStatus.STOPPING or handing_back is not None
        expected = Trigger.STOP_ABANDONED if abandoned_by_stop else Trigger.TIMEOUT_ABANDONED
        assert moves[-1].trigger == expected
        assert moves[-1].reason == (stop_reason or handing_back)
    elif end is End.PARKED:
        if status is TaskStatus.STOPPING:  # a stop that came as it parked wins
            assert final is TaskStatus.STOPPED
            assert moves[-1].trigger == Trigger.STOP_CONFIRMED
        else:
            assert then is Then.PARK
            # The park's own first move (-> retry_wait, runtime:sleeping) is legal from here.
            assert TaskStatus.RETRY_WAIT in TRANSITIONS[final]
    else:
        assert final in (TaskStatus.FAILED, TaskStatus.RETRY_WAIT)
        if status is TaskStatus.STOPPING or not retry:
            assert final is TaskStatus.FAILED
            trigger = Trigger.RESULT_INVALID if end is End.RESULT_INVALID else Trigger.FAILED
            assert moves[-1].trigger == trigger
            assert moves[-1].reason == (stop_reason if status is TaskStatus.STOPPING else None)


@pytest.mark.parametrize("status", [TaskStatus.RUNNING, TaskStatus.PAUSING])
def test_a_stop_the_run_did_not_ask_for_is_the_host_closing(status: TaskStatus) -> None:
    moves, then = steps_for(status, End.STOPPED, stop_reason=None, note="killed")
    assert then is Then.NOTHING
    assert [(m.target, m.trigger, m.reason) for m in moves] == [
        (TaskStatus.STOPPING, Trigger.SHUTDOWN, "the host is closing"),
        (TaskStatus.STOPPED, Trigger.STOP_CONFIRMED, "killed"),
    ]


def test_a_stop_reason_and_the_carriers_end_are_both_kept() -> None:
    moves, _ = steps_for(TaskStatus.STOPPING, End.STOPPED, stop_reason="ops", note="terminated")
    assert moves == ((TaskStatus.STOPPED, Trigger.STOP_CONFIRMED, "ops; terminated"),)


def test_only_failures_outside_a_stop_ask_the_retry_policy() -> None:
    asked = {(s, e) for s in LIVE for e in End if asks_retry(s, e)}
    assert asked == {
        (s, e)
        for s in LIVE
        if s is not TaskStatus.STOPPING
        for e in (End.FAILED, End.RESULT_INVALID)
    }


def test_a_paused_run_releases_the_pause_first() -> None:
    with pytest.raises(ValueError, match="release the pause first"):
        steps_for(TaskStatus.PAUSED, End.SUCCEEDED)
    target, trigger, _ = RELEASED_WHILE_PAUSED
    assert target in TRANSITIONS[TaskStatus.PAUSED]
    assert trigger == Trigger.PAUSE_RELEASED
