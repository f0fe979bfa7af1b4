from __future__ import annotations

import math

import pytest

from chongming.errors import PayloadError
from chongming.state.payload import (
    check_json_value,
    check_label,
    check_task_id,
    dump_json,
)


def deep(levels: int) -> list[object]:
    value: list[object] = []
    for _ in range(levels):
        value = [value]
    return value


def numbers() -> object:
    yield 1


@pytest.mark.parametrize(
    "value",
    [object(), {1, 2}, b"bytes", math.nan, math.inf, -math.inf, numbers(), deep(10_000)],
    ids=["object", "set", "bytes", "nan", "inf", "-inf", "generator", "deep"],
)
def test_non_json_values_are_refused(value: object) -> None:
    with pytest.raises(PayloadError) as caught:
        check_json_value(value, "result")
    assert caught.value.what == "result"


@pytest.mark.parametrize("text", ["a\x00b", "\ud800", "ok\udfff"])
def test_strings_no_store_can_hold_are_refused(text: str) -> None:
    with pytest.raises(PayloadError):
        check_json_value(text, "argument 0")
    with pytest.raises(PayloadError):
        check_json_value({"k": [text]}, "argument 0")


def test_escaped_backslash_before_u0000_text_is_fine() -> None:
    # The literal characters backslash-u-0-0-0-0 are not a NUL.
    assert "\\\\u0000" in dump_json("\\u0000", "x")
    check_json_value(["\\u0000"], "x")


@pytest.mark.parametrize(
    "value", [None, True, 3, 2.5, "x", "中文", [1, {"a": None}], {"k": "\u202e"}]
)
def test_json_values_pass(value: object) -> None:
    check_json_value(value, "x")


@pytest.mark.parametrize(
    ("task_id", "reason"),
    [
        ("", "empty"),
        ("x" * 201, "longer than 200"),
        ("a\x00b", "control"),
        ("a\nb", "control"),
        ("a\x1b[31m", "control"),
        ("a\x85b", "control"),
        ("\ud800", "surrogate"),
        (7, "must be a string"),
    ],
)
def test_bad_task_ids(task_id: object, reason: str) -> None:
    with pytest.raises(PayloadError, match=reason):
        check_task_id(task_id)


@pytest.mark.parametrize("task_id", ["job-1", "x'); drop table t; --", "100%_done", "任务\u202e1"])
def test_hostile_but_storable_task_ids(task_id: str) -> None:
    assert check_task_id(task_id) == task_id


def test_labels() -> None:
    assert check_label("\x1b[31mred") == "\x1b[31mred"  # escaped when printed, kept as data
    with pytest.raises(PayloadError, match="256"):
        check_label("x" * 257)
    with pytest.raises(PayloadError, match="NUL"):
        check_label("a\x00")


def test_payload_cap_counts_utf8_bytes() -> None:
    from chongming.state.payload import check_arguments, check_payload

    check_payload("x" * 1000, "result", limit=1000)
    with pytest.raises(PayloadError, match="over the 1,000-byte limit"):
        check_payload("x" * 1001, "result", limit=1000)
    with pytest.raises(PayloadError, match="limit"):
        check_payload("中" * 400, "result", limit=1000)  # 1,200 bytes in UTF-8
    with pytest.raises(PayloadError, match="limit"):
        check_payload({"rows": ["x" * 600, "y" * 600]}, "result", limit=1000)
    check_payload({"rows": ["x" * 600, "y" * 600]}, "result", limit=None)
    check_arguments(("x" * 400,), {"k": "y" * 400}, limit=1000)
    with pytest.raises(PayloadError, match="arguments"):
        check_arguments(("x" * 600,), {"k": "y" * 600}, limit=1000)
