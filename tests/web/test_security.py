"""Safe by default: loopback binds, tokens; and chongming imports without the extras."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chongming.cli.app import app
from chongming.web.extras import MissingExtra, need
from chongming.web.security import InsecureBind, check_bind, is_loopback, load_token

TOKEN = "a-very-long-dashboard-token-0123"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.4", False),
        ("dashboard.example", False),
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_bind_needs_a_token() -> None:
    with pytest.raises(InsecureBind, match="CHONGMING_DASHBOARD_TOKEN"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", TOKEN)
    check_bind("127.0.0.1", None)


def test_the_command_refuses_to_start_on_a_public_address_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHONGMING_DASHBOARD_TOKEN", raising=False)
    db = tmp_path / "tasks.db"
    db.touch()
    result = CliRunner().invoke(app, ["--db", str(db), "dashboard", "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert "refusing to serve the dashboard on '0.0.0.0' without a token" in result.output
    short = tmp_path / "short"
    short.write_text("tiny\n")
    result = CliRunner().invoke(
        app, ["--db", str(db), "dashboard", "--host", "0.0.0.0", "--token-file", str(short)]
    )
    assert result.exit_code == 1
    assert "at least 16 characters" in result.output


def test_tokens_come_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHONGMING_DASHBOARD_TOKEN", raising=False)
    assert load_token() is None
    monkeypatch.setenv("CHONGMING_DASHBOARD_TOKEN", TOKEN)
    assert load_token() == TOKEN
    path = tmp_path / "token"
    path.write_text(f"{TOKEN}-from-file\nignored\n")
    assert load_token(path) == f"{TOKEN}-from-file"
    path.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        load_token(path)


def test_a_missing_extra_names_the_install_command() -> None:
    with pytest.raises(MissingExtra, match=r"pip install 'chongming\[web\]'"):
        need("chongming_no_such_module", "web")
    with pytest.raises(MissingExtra, match=r"pip install 'chongming\[otel\]'"):
        need("chongming_no_such_module.trace", "otel")


def test_importing_chongming_needs_none_of_the_extras() -> None:
    code = (
        "import sys, chongming, chongming.web\n"
        "from chongming import Controller\n"
        "Controller()\n"
        "heavy = ['starlette', 'uvicorn', 'prometheus_client', 'opentelemetry', 'fastapi']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_the_dashboard_without_its_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from chongming.web import create_app
    from chongming.web.metrics import ChongmingMetrics
    from chongming.web.tracing import ChongmingTracing

    monkeypatch.setitem(sys.modules, "starlette", None)  # as if it were not installed
    with pytest.raises(MissingExtra, match=r"needs 'starlette'.*pip install 'chongming\[web\]'"):
        create_app(str(tmp_path / "tasks.db"))
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(MissingExtra, match=r"pip install 'chongming\[web\]'"):
        ChongmingMetrics()
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(MissingExtra, match=r"pip install 'chongming\[otel\]'"):
        ChongmingTracing()
