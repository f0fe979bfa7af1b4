"""The endpoints cost nothing unless asked for: no prometheus_client, no server, at import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
{statement}
heavy = ("prometheus_client", "chongming.web.probe_server", "chongming.web.health",
         "chongming.web.worker_metrics", "chongming.web.metrics", "uvicorn", "starlette")
print(sorted(name for name in heavy if name in sys.modules))
"""


def loaded_after(statement: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", CHECK.format(statement=statement)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_help_the_controller_and_the_worker_command_import_no_endpoint() -> None:
    assert loaded_after("from chongming import Controller") == "[]"
    help_run = (
        "from typer.testing import CliRunner\n"
        "from chongming.cli.app import app\n"
        "assert CliRunner().invoke(app, ['worker', '--help']).exit_code == 0"
    )
    assert loaded_after(help_run) == "[]"
    assert loaded_after("import chongming.cli.worker_command") == "[]"


def test_metrics_without_prometheus_client_name_the_extra_and_touch_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "never.db"
    blocked = (
        "import sys\n"
        "sys.modules['prometheus_client'] = None  # as if it were not installed\n"
        "from chongming.cli.app import main\n"
        f"sys.argv = ['chongming', '--db', {str(db)!r}, 'worker', '--tasks',\n"
        "            'tests.cli.worker_ops_tasks', '--metrics-port', '0']\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "chongming: error: --metrics-port: this part of chongming needs 'prometheus_client', "
        "which is not installed: pip install 'chongming[metrics]'"
    ]
    assert not db.exists()
