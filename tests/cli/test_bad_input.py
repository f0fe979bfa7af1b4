"""Bad input: exit 1 (2 for usage) with one clear line, no traceback, no secret, store untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.cli.support import assert_one_line_error, invoke

CANARY_DSN = "postgresql://u:canary-secret@127.0.0.1:1/x"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "args", [["frobnicate"], ["ps", "--no-such-flag"], ["--no-such-flag", "ps"]]
)
def test_usage_errors_exit_2(db: Path, args: list[str]) -> None:
    result = invoke(db, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_db_in_a_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "tasks.db"
    line = assert_one_line_error(invoke(missing, "ps"))
    assert "nowhere" in line
    assert not missing.parent.exists()


def test_db_that_does_not_exist_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    line = assert_one_line_error(invoke(path, "stats"))
    assert "no chongming database" in line
    assert not path.exists()


def test_db_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some text, long enough to be read as a header " * 4)
    before = _digest(path)
    line = assert_one_line_error(invoke(path, "ps"))
    assert "not a SQLite database" in line
    assert _digest(path) == before


def test_db_that_is_a_directory(tmp_path: Path) -> None:
    assert "directory" in assert_one_line_error(invoke(tmp_path, "ps"))


@pytest.mark.parametrize("args", [["ps"], ["status", "x"], ["nodes"], ["--debug", "stats"]])
def test_unreachable_postgres_never_prints_the_password(args: list[str]) -> None:
    result = invoke(CANARY_DSN, *args)
    assert result.exit_code == 1
    assert "canary-secret" not in result.output
    assert "unreachable" in result.stderr
    if "--debug" not in args:
        assert_one_line_error(result)


def test_env_var_names_the_store(db: Path) -> None:
    from typer.testing import CliRunner

    from chongming.cli.app import app

    result = CliRunner().invoke(app, ["ps", "--all", "--json"], env={"CHONGMING_DB": str(db)})
    assert result.exit_code == 0, result.stderr
    assert '"ok-1"' in result.stdout
    result = CliRunner().invoke(app, ["ps"], env={"CHONGMING_DB": CANARY_DSN})
    assert result.exit_code == 1
    assert "canary-secret" not in result.output


@pytest.mark.parametrize(
    ("ranges", "words"),
    [("15-0", "reversed"), ("a-b", "not a bucket number"), ("99", "out of range"), ("", "empty")],
)
def test_malformed_owned_buckets(db: Path, ranges: str, words: str) -> None:
    line = assert_one_line_error(invoke(db, "--num-buckets", "64", "--owned-buckets", ranges, "ps"))
    assert "--owned-buckets" in line
    assert words in line
    assert "0-63" in line


def test_num_buckets_must_be_positive(db: Path) -> None:
    assert "positive" in assert_one_line_error(invoke(db, "--num-buckets", "0", "ps"))


@pytest.mark.parametrize("command", ["status", "history", "stop", "pause", "resume"])
def test_unknown_task_id(db: Path, command: str) -> None:
    before = _digest(db)
    line = assert_one_line_error(invoke(db, command, "no-such-task"))
    assert "no-such-task" in line
    assert _digest(db) == before


@pytest.mark.parametrize("task_id", ["bad\x00id", "x" * 10_000, "tab\tid"])
@pytest.mark.parametrize("command", ["status", "history", "stop", "commands"])
def test_ids_that_no_task_can_have(db: Path, command: str, task_id: str) -> None:
    before = _digest(db)
    line = assert_one_line_error(invoke(db, command, task_id))
    assert "invalid task id" in line
    assert len(line) < 200
    assert "\x00" not in line
    assert _digest(db) == before


def test_debug_shows_the_traceback(db: Path) -> None:
    result = invoke(db, "--debug", "status", "no-such-task")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("chongming: error: ")
