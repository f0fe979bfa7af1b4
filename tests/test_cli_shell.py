from __future__ import annotations

import subprocess
import sys


def test_python_m_chongming_help_exits_zero() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chongming", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "chongming" in result.stdout


def test_console_script_help_exits_zero() -> None:
    from pathlib import Path

    script = Path(sys.executable).parent / "chongming"
    result = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
