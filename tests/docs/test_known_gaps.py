"""No page says "not yet" about something that exists.

Every statement in the docs that something is missing ("not yet", "not
built", ...) must be listed in ``known_gaps.toml`` beside this file, and
every listed gap must still be stated on its page, so the list and the pages
cannot drift apart. A gap that names the public attribute it waits for
(``absent = "chongming:TaskContext.child"``) is also checked against the
code: the day it is built, this test fails until the page says so.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GAPS = Path(__file__).with_name("known_gaps.toml")
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
#: Phrases that say something is missing. Lab notes (performance-notes.md)
#: are a history and may say what was not yet done at the time.
MISSING = re.compile(
    r"\bnot (?:yet )?(?:built|implemented|supported|available)\b"
    r"|\bnot built yet\b|\bnot yet[.)]|^\W*not yet\W*:|\bcoming later\b",
    re.IGNORECASE | re.MULTILINE,
)
HISTORY = {"docs/performance-notes.md"}


@dataclass(frozen=True, slots=True)
class Gap:
    page: str
    says: str
    why: str
    absent: str | None


def _gaps() -> list[Gap]:
    data = tomllib.loads(GAPS.read_text(encoding="utf-8"))
    return [
        Gap(entry["page"], entry["says"], entry["why"], entry.get("absent"))
        for entry in data.get("gap", [])
    ]


def _paragraphs(text: str) -> list[str]:
    """Paragraphs with whitespace folded; a heading is read with the paragraph under it."""
    blocks = [block.strip() for block in re.split(r"\n\s*\n", text) if block.strip()]
    paragraphs: list[str] = []
    heading = ""
    for block in blocks:
        if block.startswith("#") and "\n" not in block:
            heading = f"{heading} {block}".strip()
            continue
        paragraphs.append(" ".join(f"{heading} {block}".split()))
        heading = ""
    return paragraphs


def _relative(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_statement_of_a_gap_is_listed() -> None:
    listed: dict[str, list[str]] = {}
    for gap in _gaps():
        listed.setdefault(gap.page, []).append(" ".join(gap.says.split()))
    unlisted = []
    for page in PAGES:
        name = _relative(page)
        if name in HISTORY or "examples" in page.parts:
            continue
        for paragraph in _paragraphs(page.read_text(encoding="utf-8")):
            if MISSING.search(paragraph) and not any(
                says in paragraph for says in listed.get(name, [])
            ):
                unlisted.append(f"{name}: {paragraph[:120]}")
    assert unlisted == [], (
        "a page says something is missing; list it in tests/docs/known_gaps.toml "
        "or, if it exists now, say so on the page"
    )


@pytest.mark.parametrize("gap", _gaps(), ids=lambda gap: f"{gap.page}:{gap.says[:30]}")
def test_each_listed_gap_is_still_stated_and_still_missing(gap: Gap) -> None:
    page = ROOT / gap.page
    assert page.is_file(), f"{gap.page} does not exist"
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert " ".join(gap.says.split()) in text, f"{gap.page} no longer says {gap.says!r}"
    assert gap.why.strip(), "say why the gap is there"
    if gap.absent is not None:
        assert not _exists(gap.absent), (
            f"{gap.absent} exists now: update {gap.page} and remove the gap"
        )


def _exists(path: str) -> bool:
    """Whether ``module:attribute.path`` names something that exists."""
    module_name, _, attributes = path.partition(":")
    try:
        owner: object = importlib.import_module(module_name)
    except ImportError:
        return False
    for attribute in filter(None, attributes.split(".")):
        if not hasattr(owner, attribute):
            return False
        owner = getattr(owner, attribute)
    return True


def test_the_existence_check_sees_what_exists() -> None:
    assert _exists("chongming:Controller.enqueue")
    assert not _exists("chongming:Controller.no_such_method")
    assert not _exists("chongming.no_such_module")
