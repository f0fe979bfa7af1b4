"""The third-party store example in docs/ passes the store contract."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "third_party_store.py"
pytestmark = pytest.mark.example("third_party_store.py")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_example_third_party_store", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _load()


class TestThirdPartyStoreExample(example.JournalingStoreContract):  # type: ignore[name-defined,misc]
    """Every contract test, run against the example store."""


def test_the_example_runs_as_a_script(example: Path) -> None:
    assert example == EXAMPLE  # the module-level import loaded the same file
    done = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines() == ["create job-1 v0", "save job-1 v0->v1"]
