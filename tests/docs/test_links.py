"""Every relative link and image in docs/ names a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: ``[text](target)`` and ``![alt](target)``; a URL or a bare anchor is not a file.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _broken(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            broken.append(f"{page.name}: {target}")
    return broken


def test_every_relative_link_and_image_exists() -> None:
    broken = [entry for page in sorted(DOCS.glob("*.md")) for entry in _broken(page)]
    assert broken == []


def test_the_check_sees_a_missing_image(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("![a](images/gone.png) [b](there.md#part) [c](https://example.com) [d](#x)")
    assert _broken(page) == ["page.md: images/gone.png"]
