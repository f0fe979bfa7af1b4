"""The package tree shows the layers, and lower layers never import higher ones."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import chongming

ROOT = Path(chongming.__file__).parent

# Lowest first. A module may import its own layer and any layer listed before it.
LAYERS = [
    {"errors", "clock"},
    {"state"},
    {"policies"},
    {"task_api"},
    {"executors"},
    {"run"},
    {"scheduler", "render"},
    {"stores", "testing"},
    {"controller", "control", "pipeline"},
    {"blocking", "cli", "__main__", "__init__"},
]
PURE = {"state", "policies", "scheduler", "render"}  # no asyncio, no drivers
FORBIDDEN_IN_PURE = {"asyncio", "anyio", "aiosqlite", "asyncpg", "time", "threading"}


def layer_of(top: str) -> int:
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"chongming.{top} is in no layer; add it to LAYERS")


def chongming_imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import of chongming or others."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, bool]] = []
    top_level = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, id(node) in top_level) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) in top_level))
    return found


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_lower_layers_never_import_higher_ones() -> None:
    problems = []
    for path in modules():
        relative = path.relative_to(ROOT)
        top = relative.parts[0].removesuffix(".py")
        own = layer_of(top)
        for name, _ in chongming_imports(path):
            if not name.startswith("chongming.") and name != "chongming":
                continue
            parts = name.split(".")
            if len(parts) < 2:
                continue
            if layer_of(parts[1]) > own:
                problems.append(f"{relative} imports {name}")
    assert problems == []


def test_pure_layers_import_no_asyncio_driver_or_clock() -> None:
    problems = []
    for path in modules():
        relative = path.relative_to(ROOT)
        if relative.parts[0] not in PURE:
            continue
        for name, _ in chongming_imports(path):
            if name.split(".")[0] in FORBIDDEN_IN_PURE:
                problems.append(f"{relative} imports {name}")
    assert problems == []


def test_modules_stay_small() -> None:
    sizes = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in modules()}
    assert {str(p): n for p, n in sizes.items() if n > 800} == {}


def test_public_all_matches_what_is_defined() -> None:
    exported = set(chongming.__all__)
    assert len(exported) == len(chongming.__all__)
    for name in exported:
        assert getattr(chongming, name) is not None, name
    public = {n for n in vars(chongming) if not n.startswith("_")}
    public -= {"annotations", "Any", "TYPE_CHECKING"}
    submodules = {m.name for m in pkgutil.iter_modules(chongming.__path__)}
    assert public - submodules - exported == set()


def test_every_subpackage_all_is_importable() -> None:
    for info in pkgutil.walk_packages(chongming.__path__, "chongming."):
        if "postgres" in info.name or info.name.endswith("__main__"):
            continue  # optional driver; __main__ runs the CLI
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            assert hasattr(module, name), f"{info.name}.__all__ names missing {name}"
