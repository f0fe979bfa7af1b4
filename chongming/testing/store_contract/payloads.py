"""Hostile input, payload limits and encodings."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any

from chongming.errors import (
    PayloadError,
)
from chongming.state.query import TaskQuery
from chongming.state.records import Failure, FailureKind, Progress
from chongming.testing.store_contract._support import (
    _S,
    HOSTILE_STRINGS,
    T0,
    ContractBase,
    _command,
    _fill,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["PayloadContract"]


class PayloadContract(ContractBase):
    # -- hostile input and encodings -----------------------------------------

    async def test_hostile_strings_round_trip_byte_identical(self) -> None:
        big = _fill(self.max_payload_bytes - 64)
        async with self._store() as store:
            for i, text in enumerate(HOSTILE_STRINGS):
                snapshot = make_snapshot(
                    text,
                    label=text,
                    name=text,
                    owner=text,
                    bucket_key=text,
                    tags=frozenset({text, "plain"}),
                    args=(text, [text], {text: text}),
                    kwargs={text: text},
                    result={"text": text},
                    progress=Progress(done=i, message=text, unit=text),
                    failure=Failure(kind=FailureKind.EXCEPTION, message=text, exception_type=text),
                    created_at=T0 + timedelta(seconds=i),
                )
                queued, transition = next_step(snapshot, _S.QUEUED, reason=text, actor=text)
                await store.create(snapshot)
                await store.save(queued, expect_version=0, transitions=[transition])
                assert await store.get(text) == queued
                assert await store.history(text) == [transition]
                await store.submit_command(_command(text, text, reason=text, actor=text))
            for text in HOSTILE_STRINGS:
                for query in (TaskQuery(name=text), TaskQuery(owner=text), TaskQuery(tag=text)):
                    assert [s.task_id for s in await store.query(query)] == [text], query
            claimed = await store.claim_commands("node-a", lease_seconds=30, limit=100)
            assert sorted(c.command_id for c in claimed) == sorted(HOSTILE_STRINGS)
            assert all(c.reason == c.task_id == c.actor == c.command_id for c in claimed)

            huge = make_snapshot("huge", args=(big,), kwargs={"big": big}, result=big)
            await store.create(huge)
            assert await store.get("huge") == huge

    async def test_payloads_over_the_cap_are_refused_and_nothing_written(self) -> None:
        cap = self.max_payload_bytes
        over = "x" * (cap + 1)
        async with self._store() as store:
            for fields in ({"result": over}, {"args": (over,)}, {"kwargs": {"k": over}}):
                error = await _raises(PayloadError, store.create(make_snapshot("big", **fields)))
                assert "limit" in str(error)
                assert await store.get("big") is None
            good = make_snapshot("big")
            await store.create(good)
            done = dataclasses.replace(good, status_version=1, result=[over])
            await _raises(PayloadError, store.save(done, expect_version=0))
            assert await store.get("big") == good

    async def test_what_no_store_can_hold_is_refused_alike_and_nothing_written(self) -> None:
        """NUL and lone surrogates: PayloadError from every store, never a driver error."""
        async with self._store() as store:
            for n, bad in enumerate(("a\x00b", "\ud800")):
                task_id = f"t{n}"
                bad_fields: list[dict[str, Any]] = [
                    {"label": bad},
                    {"owner": bad},
                    {"args": (bad,)},
                    {"result": [bad]},
                ]
                for fields in bad_fields:
                    await _raises(PayloadError, store.create(make_snapshot(task_id, **fields)))
                    assert await store.get(task_id) is None
                good = make_snapshot(task_id)
                await store.create(good)
                queued, transition = next_step(good, _S.QUEUED, reason=bad)
                await _raises(PayloadError, store.save(queued, 0, [transition]))
                await _raises(PayloadError, store.append([transition]))
                progress = Progress(done=1, message=bad)
                await _raises(PayloadError, store.touch(task_id, progress=progress))
                await _raises(PayloadError, store.submit_command(_command(f"c{n}", reason=bad)))
                assert await store.get(task_id) == good
                assert await store.history(task_id) == []
                assert await store.claim_commands("node-a", lease_seconds=30) == []
                queued, transition = next_step(good, _S.QUEUED)
                await store.save(queued, 0, [transition])  # and the store carries on
                assert await store.history(task_id) == [transition]

    async def test_datetimes_come_back_in_utc_to_the_microsecond(self) -> None:
        shanghai = timezone(timedelta(hours=8))
        at = datetime(2026, 10, 2, 16, 30, 5, 123457, tzinfo=shanghai)
        async with self._store() as store:
            snapshot = make_snapshot("t", created_at=at, updated_at=at, queued_at=at)
            queued, transition = next_step(snapshot, _S.QUEUED)
            await store.create(snapshot)
            await store.save(queued, expect_version=0, transitions=[transition])
            await store.touch("t", heartbeat=at + timedelta(microseconds=1))
            stored = await store.get("t")
            (recorded,) = await store.history("t")
            assert stored is not None
            for value in (stored.created_at, stored.queued_at, recorded.at):
                assert value is not None
                assert value.utcoffset() == timedelta(0)
            assert stored.created_at == at
            assert stored.created_at.microsecond == 123457
            assert stored.last_heartbeat_at == at + timedelta(microseconds=1)
            assert recorded.at == transition.at
