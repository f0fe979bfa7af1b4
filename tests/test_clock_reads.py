"""Where the runtime reads time: through the injected clock or the loop's, never the OS directly.

``chongming.clock`` says it: wall time comes from a :class:`~chongming.clock.Clock`
(a test pins it), durations from ``loop.time()`` (virtual-time tests move
them). A ``time.time()`` or ``datetime.now()`` in a runtime module is a time a
test cannot pin and a record a fake clock does not explain.
"""

from __future__ import annotations

import ast
from pathlib import Path

import chongming

ROOT = Path(chongming.__file__).parent
#: The runtime's layers: everything that has a clock to use.
RUNTIME = ("controller", "run", "control", "scheduler", "pipeline", "task_api", "policies")
#: Reads of the OS clocks that bypass the injected ones (a call; ``time.time`` passed
#: as the system clock itself, one call less per transition, is the clock).
FORBIDDEN = {("time", "time"), ("time", "monotonic"), ("datetime", "now"), ("datetime", "utcnow")}


def _direct_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.name}:{node.lineno} {node.func.value.id}.{node.func.attr}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and (node.func.value.id, node.func.attr) in FORBIDDEN
    ]


def test_the_runtime_reads_time_only_through_its_clocks() -> None:
    found = [
        read
        for package in RUNTIME
        for path in sorted((ROOT / package).rglob("*.py"))
        for read in _direct_reads(path)
    ]
    assert found == []


def test_the_check_sees_a_direct_read(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import time\nfrom datetime import datetime\nx = time.time()\ny = datetime.now()\n"
    )
    assert len(_direct_reads(sample)) == 2
