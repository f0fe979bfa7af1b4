"""A durable task's journal on its page: the timeline builder, its markup, and the app."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.etree import ElementTree

import httpx
import pytest

from chongming import Controller
from chongming.state.records import Transition
from chongming.state.status import TaskStatus as S
from chongming.state.triggers import Trigger
from chongming.stores.durable import Fact, StepRecord
from chongming.stores.journal import EffectEntry, JournalDetails
from chongming.web.journal import MAX_ENTRIES, PREVIEW_CHARS, build_journal, preview
from chongming.web.journal_page import journal_section
from tests.conftest import FAST
from tests.web.support import dashboard_client, register

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EVIL = "<script>alert(1)</script>\u202egnp.exe"


def _t(version: int, a: S, b: S, trigger: str, seconds: float, attempt: int = 1) -> Transition:
    return Transition(
        task_id="d-1",
        version=version,
        from_status=a,
        to_status=b,
        at=T0 + timedelta(seconds=seconds),
        trigger=trigger,
        attempt=attempt,
    )


#: Run 1 parks for a sleep, run 2 is lost with its worker, run 3 (resumed) succeeds.
HISTORY = [
    _t(1, S.PENDING, S.QUEUED, Trigger.ENQUEUED, 0, 0),
    _t(2, S.QUEUED, S.STARTING, Trigger.DISPATCH, 1),
    _t(3, S.STARTING, S.RUNNING, Trigger.LAUNCHED, 2),
    _t(4, S.RUNNING, S.RETRY_WAIT, Trigger.SLEEPING, 3),
    _t(5, S.RETRY_WAIT, S.QUEUED, Trigger.PARKED, 4),
    _t(6, S.QUEUED, S.STARTING, Trigger.DISPATCH, 60),
    _t(7, S.STARTING, S.RUNNING, Trigger.LAUNCHED, 61),
    _t(8, S.RUNNING, S.LOST, Trigger.LEASE_EXPIRED, 90),
    _t(9, S.LOST, S.QUEUED, Trigger.RESUMED, 91),
    _t(10, S.QUEUED, S.STARTING, Trigger.DISPATCH, 92),
    _t(11, S.STARTING, S.RUNNING, Trigger.LAUNCHED, 93),
    _t(12, S.RUNNING, S.SUCCEEDED, Trigger.COMPLETED, 95),
]


def _step(name: str, seq: int, epoch: int, value: object, ok: bool = True) -> StepRecord:
    return StepRecord(name=name, occurrence=0, ok=ok, value=value, seq=seq, epoch=epoch)


STEPS = [
    _step("download", 1, 1, {"bytes": 4096}),
    _step("sleep:cool-down", 2, 1, (T0 + timedelta(seconds=60)).timestamp()),
    _step("fact:approval:deadline", 3, 2, None),
    _step(EVIL, 4, 2, {"type": "RuntimeError", "message": "<b>no</b>"}, ok=False),
    _step("fact:approval", 5, 3, {"fact": {"by": "ops"}}),
]


def test_steps_sit_in_the_run_of_their_epoch_between_its_start_and_end() -> None:
    journal = build_journal(HISTORY, STEPS, [], epoch=3)
    assert journal.durable
    assert journal.steps == 5
    kinds = [(entry.kind, entry.epoch) for entry in journal.entries if entry.kind != "transition"]
    assert kinds == [
        ("run", 1),
        ("step", 1),
        ("sleep", 1),
        ("run", 2),
        ("fact-wait", 2),
        ("step", 2),
        ("run", 3),
        ("fact-decided", 3),
    ]
    titles = [entry.title for entry in journal.entries]
    # each run's steps come right after its "starting -> running" and before its end
    assert titles.index("run 1 (epoch 1, attempt 1)") == titles.index("starting → running") + 1
    assert titles.index("sleep 'cool-down'") < titles.index("running → retry_wait")
    assert [run.ending for run in journal.runs] == [
        "parked (a long sleep or fact wait gave its slot back)",
        "lost: its worker's lease expired",
        "succeeded",
    ]
    assert [run.lost for run in journal.runs] == [False, True, False]
    sleep = next(entry for entry in journal.entries if entry.kind == "sleep")
    assert sleep.detail == f"wakes at {(T0 + timedelta(seconds=60)).isoformat()}"
    wait = next(entry for entry in journal.entries if entry.kind == "fact-wait")
    assert wait.detail == "no deadline"
    failed = next(entry for entry in journal.entries if not entry.ok and entry.kind == "step")
    assert "RuntimeError: <b>no</b>" in failed.preview


def test_effects_join_their_run_and_times_order_it_when_every_entry_has_one() -> None:
    at = {
        ("download", 0): T0 + timedelta(seconds=2.5),
        ("sleep:cool-down", 0): T0 + timedelta(seconds=2.9),
    }
    effects = [
        EffectEntry(
            op_key="charge",
            committed=True,
            result={"paid": 5},
            epoch=1,
            started_at=T0 + timedelta(seconds=2.6),
            done_at=T0 + timedelta(seconds=2.7),
        ),
        EffectEntry(op_key="<mail>", committed=False, epoch=3),  # no time: run 3 keeps its order
        EffectEntry(op_key="legacy", committed=True),  # no epoch kept
    ]
    details = JournalDetails(step_times=at, fact_times={"approval": T0}, effects=effects)
    journal = build_journal(HISTORY, STEPS, [], epoch=3, details=details)
    run1 = [e.title for e in journal.entries if e.epoch == 1 and e.kind != "run"]
    assert run1 == ["step download", "effect 'charge' committed", "sleep 'cool-down'"]
    run3 = [e.title for e in journal.entries if e.epoch == 3 and e.kind != "run"]
    assert run3 == ["fact 'approval' received", "effect '<mail>' begun, not committed"]
    assert journal.entries[-2].title == "effects (no epoch kept)"
    assert journal.entries[-1].title == "effect 'legacy' committed"
    assert journal.effects == 3
    charge = next(e for e in journal.entries if e.title.startswith("effect 'charge'"))
    assert "0.100 s" in charge.detail
    markup = journal_section(journal)
    assert "effect &#x27;&lt;mail&gt;&#x27; begun" in markup
    assert "2026-12-01 12:00:02.500" in markup  # a step's recorded time, to the millisecond
    assert "2026-12-01 12:00:00.000" not in markup  # no fact here: no sent time shown


def test_a_sent_fact_sits_before_the_first_transition_after_it() -> None:
    fact = Fact(task_id="d-1", name="approval", payload={"ok": True}, key="ops")
    sent = {"approval": T0 + timedelta(seconds=30)}  # while parked, between v5 and v6
    journal = build_journal(
        HISTORY, STEPS, [fact], epoch=3, details=JournalDetails(fact_times=sent)
    )
    titles = [entry.title for entry in journal.entries]
    where = titles.index("fact 'approval' sent")
    before, after = journal.entries[where - 1].transition, journal.entries[where + 1].transition
    assert before is not None
    assert before.version == 5
    assert after is not None
    assert after.version == 6
    assert journal.entries[where].detail == "by ops"


def test_a_task_without_a_run_row_has_no_journal() -> None:
    journal = build_journal(HISTORY, [], [], epoch=None)
    assert not journal.durable
    assert "has no journal" in journal_section(journal)


def test_previews_are_bounded_and_steps_past_the_limit_are_counted() -> None:
    huge = preview(["x" * 1000] * 1000)
    assert len(huge) < PREVIEW_CHARS + 40
    assert huge.endswith("(1,003,001 characters)")
    many = [_step(f"s{i}", i + 1, 1, i) for i in range(MAX_ENTRIES + 7)]
    journal = build_journal(HISTORY, many, [], epoch=1)
    assert journal.hidden_steps == 7
    assert sum(1 for entry in journal.entries if entry.kind == "step") == MAX_ENTRIES
    assert "7 more step(s) not shown" in journal_section(journal)


def test_the_section_escapes_names_previews_and_senders() -> None:
    fact = Fact(task_id="d-1", name="approval", payload=EVIL, key="<img src=x onerror=1>")
    markup = journal_section(build_journal(HISTORY, STEPS, [fact], epoch=3))
    for raw in ("<script>", "<img", "<b>"):
        assert raw not in markup
    assert html.escape("<script>alert(1)</script>") in markup
    assert "\\u202egnp.exe" in markup  # the override shown, not applied
    assert "\u202e" not in markup
    ElementTree.fromstring(f"<div>{markup}</div>")  # well-formed


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Controller]:
    controller = Controller(
        store=str(tmp_path / "tasks.db"), owner="node-a", poll_interval=0.05, windows=FAST
    )
    register(controller)
    async with controller:
        yield controller


@pytest.fixture
async def dash(node: Controller) -> AsyncIterator[httpx.AsyncClient]:
    async with dashboard_client(node) as client:
        yield client


async def test_a_durable_task_page_shows_its_journal(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    handle = await node.submit("journaled", task_id="j-1", size=20_000)
    await node.signal("j-1", "approval", {"by": "<ops>"}, key="pager <duty>")
    done = await handle.wait(timeout=30)
    assert done.status is S.SUCCEEDED
    page = await dash.get("/tasks/j-1")
    assert page.status_code == 200
    body = page.text
    assert 'id="journal"' in body
    assert "step fetch &lt;b&gt;rows&lt;/b&gt;" in body  # a step name is text
    assert "step flaky raised" in body
    assert "RuntimeError: the &lt;i&gt;flaky&lt;/i&gt; upstream said no" in body
    assert "waits for fact &#x27;approval&#x27;" in body
    assert "fact &#x27;approval&#x27; received" in body
    assert "sleep &#x27;cool-down&#x27;" in body
    assert "pager &lt;duty&gt;" in body  # who sent the fact
    assert "effect &#x27;charge&#x27; committed" in body
    assert "j-1:charge" in body  # the effect's result preview
    assert "not kept by this store" not in body  # SQLite keeps when the fact was sent
    assert len(body) < 60_000  # 20,000 rows of result, a bounded preview
    assert "characters)" in body
    fragment = await dash.get("/fragments/tasks/j-1")
    assert 'id="journal"' in fragment.text  # the live part carries it too


async def test_a_plain_task_says_it_has_no_journal_and_an_unknown_one_is_404(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    await (await node.submit("quick", task_id="plain-1")).wait(timeout=10)
    page = await dash.get("/tasks/plain-1")
    assert page.status_code == 200
    assert 'id="no-journal"' in page.text
    missing = await dash.get("/tasks/no-such-task")
    assert missing.status_code == 404
    assert "no-such-task" in missing.text
