"""What a task's returned value must be to be recorded as its result."""

from __future__ import annotations

import inspect

from chongming.errors import PayloadError
from chongming.run.verdict import Verdict, VerdictKind
from chongming.state.payload import json_form, plain_json
from chongming.state.records import Failure, FailureKind, JsonValue
from chongming.task_api.context import TaskContext

__all__ = ["check_result"]


def check_result(verdict: Verdict, context: TaskContext | None, limit: int | None) -> Verdict:
    """The verdict of an attempt whose function returned: success only for a storable result.

    A coroutine function that left a checkpoint unawaited fails (it did not
    do what it meant to); a result that is not JSON, or over the payload
    limit, fails as ``result_invalid`` with the fix in its message; a result
    is kept in its JSON form.
    """
    if context is not None and context.has_unawaited_checkpoint:
        error = context.misuse_error()
        failure = Failure(
            kind=FailureKind.EXCEPTION,
            message=str(error),
            exception_type=type(error).__name__,
            retryable=False,
        )
        return Verdict(kind=VerdictKind.FAILED, failure=failure, error=error)
    value: JsonValue = verdict.value
    if plain_json(value):
        return verdict  # None, a bool, a 64-bit int: stored as it is, no check can fail
    if inspect.iscoroutine(value):
        value.close()  # never awaited: close it so Python does not warn at exit
        failure = Failure(
            kind=FailureKind.RESULT_INVALID,
            message="the task returned a coroutine; declare the task function `async def`",
            exception_type="coroutine",
            retryable=False,
        )
        return Verdict(kind=VerdictKind.FAILED, failure=failure)
    try:
        value = json_form(value, "result", limit)
    except PayloadError as error:
        failure = Failure(
            kind=FailureKind.RESULT_INVALID,
            message=f"{error}; return JSON data (store large data elsewhere and return a pointer)",
            exception_type=type(value).__name__,
            retryable=False,
        )
        return Verdict(kind=VerdictKind.FAILED, failure=failure)
    if value is verdict.value:
        return verdict
    return Verdict(kind=VerdictKind.SUCCEEDED, value=value)
