"""The tree drawn in ``chongming.errors``'s docstring is the class tree; ``__all__`` names it.

The drawing is the documentation callers read to choose what to catch: a
class missing from it, or drawn under the wrong parent, is a lie there.
"""

from __future__ import annotations

import re

from chongming import errors

_LINE = re.compile(r"^(?P<indent>[ │]*)(?:[├└]── )?(?P<name>[A-Z]\w+)(?: \((?P<mixed>[\w, ]+)\))?")


def drawn() -> dict[str, tuple[str | None, list[str]]]:
    """Each drawn class: its drawn parent and the bases named in parentheses."""
    text = errors.__doc__ or ""
    start = text.index("    ChongmingError\n")
    tree: dict[str, tuple[str | None, list[str]]] = {}
    parents: list[str] = []
    for line in text[start:].splitlines():
        if not line.strip():
            break
        match = _LINE.match(line[4:])
        assert match is not None, line
        depth = len(match["indent"]) // 4 + (0 if match["name"] == "ChongmingError" else 1)
        del parents[depth:]
        mixed = [name.strip() for name in (match["mixed"] or "").split(",") if name.strip()]
        tree[match["name"]] = (parents[-1] if parents else None, mixed)
        parents.append(match["name"])
    return tree


def test_every_error_is_drawn_under_its_parent_with_what_it_mixes_in() -> None:
    tree = drawn()
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.ChongmingError)
    }
    assert sorted(defined - tree.keys()) == [], "draw these in the docstring"
    assert sorted(tree.keys() - defined) == [], "drawn but not defined"
    for name, (parent, mixed) in tree.items():
        cls = getattr(errors, name)
        if parent is not None:
            assert getattr(errors, parent) in cls.__bases__, (name, parent)
        for base in mixed:
            assert base in {klass.__name__ for klass in cls.__mro__}, (name, base)


def test_all_names_every_error() -> None:
    public = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and not name.startswith("_")
    }
    assert set(errors.__all__) == public
