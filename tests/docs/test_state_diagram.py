"""The state diagram and table in docs/state-model.md match the transition table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chongming.state import TRANSITIONS, TaskStatus
from chongming.state.diagram import (
    DIAGRAM_MARKERS,
    REGENERATE_COMMAND,
    TABLE_MARKERS,
    MarkerError,
    embed,
    extract,
    main,
    render_blocks,
    render_markdown_table,
    render_mermaid,
    render_page,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "state-model.md"


@pytest.mark.parametrize("markers", [DIAGRAM_MARKERS, TABLE_MARKERS], ids=["diagram", "table"])
def test_docs_page_matches_the_transition_table(markers: tuple[str, str]) -> None:
    embedded = extract(PAGE.read_text(encoding="utf-8"), markers)
    expected = render_blocks()[markers]
    assert embedded == expected, (
        f"{PAGE.name} is out of date with chongming.state.TRANSITIONS "
        f"(block {markers[0]}); regenerate it with: {REGENERATE_COMMAND}"
    )


def test_mermaid_has_every_edge_and_marks_terminal_states() -> None:
    text = render_mermaid()
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2"
    assert "    [*] --> pending" in lines
    edges = {(source, target) for source, targets in TRANSITIONS.items() for target in targets}
    drawn = set()
    for line in lines[1:]:
        left, arrow, right = line.strip().partition(" --> ")
        if arrow and "[*]" not in (left, right):
            drawn.add((TaskStatus(left), TaskStatus(right)))
    assert drawn == edges
    terminal = [s.value for s in TaskStatus if s.is_terminal]
    for state in terminal:
        assert f"    {state} --> [*]" in lines
    assert f"    class {','.join(terminal)} terminal" in lines


def test_rendering_is_deterministic_whatever_the_mapping_order() -> None:
    shuffled = {source: frozenset(TRANSITIONS[source]) for source in reversed(list(TRANSITIONS))}
    assert render_mermaid(shuffled) == render_mermaid()
    assert render_markdown_table(shuffled) == render_markdown_table()


def test_terminal_states_come_from_the_table_given() -> None:
    table = {TaskStatus.PENDING: {TaskStatus.QUEUED}, TaskStatus.QUEUED: {TaskStatus.FAILED}}
    text = render_mermaid(table)
    assert text.splitlines() == [
        "stateDiagram-v2",
        "    [*] --> pending",
        "    pending --> queued",
        "    queued --> failed",
        "    failed --> [*]",
        "    classDef terminal font-weight:bold,stroke-width:3px",
        "    class failed terminal",
    ]


def test_embed_replaces_only_between_markers() -> None:
    start, end = DIAGRAM_MARKERS
    page = f"intro\n{start}\nold\n{end}\noutro\n"
    assert embed(page, "new\n") == f"intro\n{start}\nnew\n{end}\noutro\n"
    assert extract(embed(page, "new\n")) == "new\n"


def test_missing_or_repeated_markers_are_refused() -> None:
    start, end = DIAGRAM_MARKERS
    with pytest.raises(MarkerError, match="not found"):
        extract("no markers here")
    with pytest.raises(MarkerError, match="not found"):
        extract(f"{start}\nunterminated")
    with pytest.raises(MarkerError, match="more than once"):
        extract(f"{start}\na\n{end}\n{start}\nb\n{end}\n")


def test_cli_write_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.md"
    blocks = "".join(f"{start}\nstale\n{end}\n" for start, end in (DIAGRAM_MARKERS, TABLE_MARKERS))
    page.write_text(f"# Title\n\n{blocks}\nafter\n", encoding="utf-8")

    assert main(["--check", str(page)]) == 1
    assert REGENERATE_COMMAND in capsys.readouterr().err

    assert main(["--write", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text == render_page(text)
    assert text.startswith("# Title\n")
    assert text.endswith("\nafter\n")
    assert main(["--check", str(page)]) == 0

    assert main([]) == 0
    assert capsys.readouterr().out.endswith(render_mermaid())


def test_cli_reports_a_page_without_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "plain.md"
    page.write_text("nothing to replace\n", encoding="utf-8")
    assert main(["--write", str(page)]) == 1
    assert "not found" in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == "nothing to replace\n"


def test_module_entry_point_checks_the_real_page() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chongming.state.diagram", "--check", str(PAGE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
