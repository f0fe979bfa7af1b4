"""Helpers of the CLI tests: invoke the app in-process, with stdout and stderr apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from chongming.cli.app import app


def invoke(db: Path | str | None, *args: str) -> Result:
    runner = CliRunner()
    argv = ([] if db is None else ["--db", str(db)]) + list(args)
    return runner.invoke(app, argv, env={"CHONGMING_DB": None})


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def assert_one_line_error(result: Result, code: int = 1) -> str:
    """Exit ``code``, nothing on stdout, one ``chongming: error:`` line, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("chongming: error: "), lines
    assert "Traceback" not in result.stderr
    return lines[0]
