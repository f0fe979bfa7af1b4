"""The task logger redacts by default on every executor, and the worker's formats keep it so."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from chongming import Controller, InlineExecutor, ProcessExecutor, ThreadExecutor
from chongming.logs import TASK_LOG_REDACTION, JsonFormatter, LogFormat, install_handler
from chongming.logs.records import RedactingFilter
from tests.logs.secret_tasks import CANARY, log_everything, log_everything_async


class Kept(logging.Handler):
    """Keeps the records that reach ``chongming.task`` and their formatted text."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(formatter)
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


@pytest.fixture
def task_records() -> Iterator[Kept]:
    """A plain handler on ``chongming.task`` (no redaction of its own: the logger's only)."""
    logger = logging.getLogger("chongming.task")
    kept = Kept(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    level, logger.level = logger.level, logging.DEBUG
    logger.addHandler(kept)
    try:
        yield kept
    finally:
        logger.removeHandler(kept)
        logger.setLevel(level)


@pytest.mark.parametrize("executor", ["inline", "thread", "process", "async"])
async def test_every_task_log_path_is_redacted_by_default(
    task_records: Kept, executor: str
) -> None:
    assert TASK_LOG_REDACTION.enabled
    choice = {
        "inline": InlineExecutor(),
        "thread": ThreadExecutor(),
        "process": ProcessExecutor(),
        "async": None,
    }[executor]
    fn = log_everything_async if executor == "async" else log_everything
    try:
        async with Controller() as controller:
            controller.register("logs", fn, executor=choice)
            run = await controller.submit("logs", task_id=f"logs-{executor}")
            outcome = await run.wait(timeout=60)
    finally:
        if isinstance(choice, ProcessExecutor):
            await choice.aclose()  # its worker process is the executor's, not the controller's
    assert outcome.value == "logged"
    text = "\n".join(task_records.lines)
    assert len(task_records.records) == 8, text
    assert CANARY not in text
    for record in task_records.records:
        assert CANARY not in repr(vars(record))  # nor in any field another handler may read
    assert f"logger.logs-{executor}" not in text
    assert {r.name for r in task_records.records} == {f"chongming.task.logs-{executor}"}
    # what is not secret is still there, so the line still says what happened
    for kept in (
        "connecting to postgresql://app:***@db.internal:5432/orders",
        "login as bob with token ***",
        "https://api.example.com/v1/charge?api_key=***&amount=***",
        "'Accept': 'json'",
        "bob uses password ***",
        "the charge failed",
        "ConnectionError: could not reach postgresql://app:***@db.internal:5432/orders",
    ):
        assert kept in text, kept
    extra = next(r for r in task_records.records if r.getMessage() == "secret fields")
    if executor == "process":  # a child forwards message and traceback, not extra fields
        assert "client_secret" not in vars(extra)
    else:
        assert (vars(extra)["client_secret"], vars(extra)["rows"]) == ("***", 3)


async def test_the_json_format_is_one_redacted_object_per_line() -> None:
    stream = io.StringIO()
    logger = logging.Logger("probe.json")  # outside the registry: nothing else sees it
    install_handler(LogFormat.JSON, stream=stream, logger=logger)
    async with Controller() as controller:
        logger.propagate = False
        task_logger = logging.getLogger("chongming.task")
        handler = logger.handlers[0]
        task_logger.addHandler(handler)
        level, task_logger.level = task_logger.level, logging.INFO
        try:
            controller.register("logs", log_everything, executor=InlineExecutor())
            await (await controller.submit("logs", task_id="j-1")).wait(timeout=30)
        finally:
            task_logger.removeHandler(handler)
            task_logger.setLevel(level)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 8
    objects = [json.loads(line) for line in lines]
    assert CANARY not in stream.getvalue()
    assert {o["task_id"] for o in objects} == {"j-1"}
    assert {o["logger"] for o in objects} == {"chongming.task.j-1"}
    assert [o["level"] for o in objects].count("warning") == 1
    failed = next(o for o in objects if o["message"] == "the charge failed")
    assert "ConnectionError: could not reach postgresql://app:***@" in failed["exception"]
    fields = next(o for o in objects if o["message"] == "secret fields")
    assert (fields["client_secret"], fields["rows"]) == ("***", 3)
    broken = next(o for o in objects if o["message"].startswith("multi"))
    assert broken["message"] == "multi\nline token=***"  # one line on the wire all the same


def test_a_handler_filter_redacts_any_logger_and_can_be_told_known_secrets() -> None:
    stream = io.StringIO()
    logger = logging.Logger("probe.text")
    redaction = RedactingFilter({"plain-known-value"})
    install_handler(LogFormat.TEXT, stream=stream, logger=logger, redaction=redaction)
    logger.warning("driver said %s; token=%s", "bad login plain-known-value", CANARY)
    logger.info("two\nlines")
    text = stream.getvalue()
    assert "plain-known-value" not in text
    assert CANARY not in text
    first, second = text.splitlines()
    assert first.endswith("WARNING probe.text: driver said bad login ***; token=***")
    assert second.endswith("INFO probe.text: two\\nlines")  # a task cannot forge a line


def test_json_formatter_survives_values_that_are_not_json() -> None:
    record = logging.LogRecord("x", logging.INFO, "", 0, "m", (), None)
    record.__dict__["weird"] = {1, 2}
    assert json.loads(JsonFormatter().format(record))["weird"] == "{1, 2}"


def test_turning_redaction_off_is_possible_and_explicit() -> None:
    redaction = RedactingFilter(enabled=False)
    record = logging.LogRecord("x", logging.INFO, "", 0, "token=%s", (CANARY,), None)
    assert redaction.filter(record)
    assert CANARY in record.getMessage()
