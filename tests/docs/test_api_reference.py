"""The API reference (docs/reference/api.md) documents every public name, once.

``make docs`` renders it from the docstrings with warnings as errors; these
checks keep the page and ``chongming.__all__`` from drifting apart without
needing the docs toolchain installed.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from pathlib import Path

import chongming

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "reference" / "api.md"
MKDOCS = ROOT / "mkdocs.yml"


def _documented() -> list[str]:
    return re.findall(r"^::: chongming\.(\w+)$", API.read_text(encoding="utf-8"), re.M)


def test_every_public_name_is_in_the_reference_once() -> None:
    documented = Counter(_documented())
    assert sorted(set(chongming.__all__) - set(documented)) == [], "missing from api.md"
    assert sorted(set(documented) - set(chongming.__all__)) == [], "not public, yet in api.md"
    assert [name for name, count in documented.items() if count > 1] == []


def test_every_public_name_has_a_docstring() -> None:
    undocumented = [
        name
        for name in chongming.__all__
        if not (inspect.getdoc(getattr(chongming, name)) or "").strip()
    ]
    assert undocumented == []


def test_the_manual_is_strict_and_lists_every_page() -> None:
    config = MKDOCS.read_text(encoding="utf-8")
    assert re.search(r"^strict: true$", config, re.M)
    pages = {
        str(path.relative_to(ROOT / "docs"))
        for path in (ROOT / "docs").rglob("*.md")
        if "examples" not in path.parts
    }
    in_nav = set(re.findall(r":\s+([\w/.-]+\.md)\s*$", config, re.M))
    assert sorted(pages - in_nav) == [], "pages missing from the nav of mkdocs.yml"
    assert sorted(in_nav - pages) == [], "the nav of mkdocs.yml names pages that do not exist"
