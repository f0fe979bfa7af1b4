"""The package tree shows the layers, and each package imports only what its contract allows.

The contracts are an explicit map, not a linear order: ``stores/`` and
``run/`` sit side by side and must not know each other, so "lower layers
only" cannot say it. ``docs/architecture.md`` states the same rules in prose.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import chongming

ROOT = Path(chongming.__file__).parent

_BASE = frozenset({"errors", "clock", "logs", "exports", "background"})
_CORE = _BASE | {"state", "policies", "task_api"}

#: What each top-level part of ``chongming/`` may import of chongming (its own
#: package is always allowed). An entry is a top-level name (``"stores"``) or
#: one module (``"stores.base"``) when only that part may be used.
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "clock": frozenset(),
    # lazy package exports: what a package's __init__ names, imported on first use
    "exports": frozenset(),
    # a component's background loop: started once, cancelled and awaited on close
    "background": frozenset(),
    # redaction and log formats: usable by every layer above the state model
    "logs": frozenset({"errors"}),
    # the state model: pure data and decisions
    "state": frozenset({"errors"}),
    "policies": frozenset({"errors", "state"}),
    "render": frozenset({"errors", "state"}),
    "scheduler": frozenset({"errors", "state", "policies"}),
    "task_api": _BASE | {"state", "policies", "schedules.cadence"},
    # schedules: tick arithmetic (pure) and the scheduler loop over the store port
    "schedules": _BASE | {"state", "stores.base", "stores.schedules"},
    # executors carry one call; a run drives its executors, never the reverse
    "executors": _CORE,
    "run": _CORE | {"executors"},
    # persistence stands beside the runtime and knows nothing of it
    "stores": _BASE | {"state"},
    "testing": _BASE | {"state", "stores"},
    # the facade wires the runtime; of the stores it may use the port (the
    # TaskStore protocol and the records it speaks in: commands, nodes,
    # writes, the queue, cluster limits, durable records, a granted claim's, a spawned
    # child's), never a backend
    "controller": _CORE
    | {"executors", "run", "scheduler", "render", "plane", "pipeline"}
    | {"stores.base", "stores.nodes", "stores.writes", "stores.queue", "stores.limits"}
    | {"stores.durable", "stores.rates", "stores.retention", "stores.schedules", "schedules"}
    | {"stores.granted", "stores.children"},
    # coming packages: the control plane, pipelines, the dashboard
    "plane": _CORE | {"executors", "run", "scheduler", "stores"},
    "pipeline": _CORE | {"run", "scheduler"},
    "web": _CORE
    | {"run", "scheduler", "render", "stores", "plane", "controller", "blocking"}
    | {"schedules"},
    # thin shells over everything
    "blocking": _CORE | {"executors", "run", "scheduler", "render", "stores", "controller"},
    "cli": _CORE
    | {"executors", "run", "scheduler", "render", "stores", "plane", "controller", "web"}
    | {"schedules"},
    "__main__": frozenset({"cli"}),
    "__init__": _CORE
    | {"executors", "run", "scheduler", "render", "stores", "testing", "controller", "blocking"}
    | {"plane", "pipeline"},
}
#: Map entries that may have no package yet (the second phase brings them).
COMING = frozenset({"plane", "pipeline", "web"})

#: Pure layers: decisions tested without a loop, a database, a thread or a clock.
PURE = frozenset({"state", "policies", "scheduler", "render"})
FORBIDDEN_IN_PURE = frozenset(
    {
        "asyncio",
        "anyio",
        "sniffio",
        "uvloop",
        "aiosqlite",
        "sqlite3",
        "asyncpg",
        "time",
        "threading",
        "concurrent",
        "multiprocessing",
        "subprocess",
        "socket",
        "chongming.clock",
    }
)


def top_of(path: Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["chongming", *parts])


def imports_of(path: Path) -> Iterator[str]:
    """Every module ``path`` imports: absolute, relative (resolved) and ``import_module("...")``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            yield base
            if base == "chongming" or node.level:
                # ``from chongming import state`` imports the subpackage itself
                yield from (f"{base}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def packages_present() -> set[str]:
    return {top_of(path) for path in modules()}


def allows(rules: frozenset[str], target: list[str]) -> bool:
    """``target`` (``["stores", "base"]``) is allowed by a top-level or a module entry."""
    return any(target[: len(rule.split("."))] == rule.split(".") for rule in rules)


def violations() -> list[str]:
    problems = []
    for path in modules():
        top = top_of(path)
        rules = ALLOWED.get(top, frozenset())
        for name in imports_of(path):
            parts = name.split(".")
            if parts[0] != "chongming":
                continue
            target = parts[1:]
            if not target:
                if top not in {"__init__", "__main__", "cli", "web"}:
                    problems.append(f"{path.relative_to(ROOT)} imports the chongming root")
                continue
            if target[0] == top or allows(rules, target):
                continue
            problems.append(f"{path.relative_to(ROOT)} imports {name}")
    return sorted(set(problems))


def test_every_package_has_a_contract_and_every_contract_a_package() -> None:
    present = packages_present()
    assert sorted(present - ALLOWED.keys()) == [], "add these to ALLOWED"
    assert sorted(ALLOWED.keys() - present - COMING) == [], "ALLOWED names missing packages"
    named = {rule.split(".")[0] for rules in ALLOWED.values() for rule in rules}
    assert sorted(named - ALLOWED.keys()) == [], "a rule names a package with no entry"


def test_each_package_imports_only_what_its_contract_allows() -> None:
    assert violations() == []


def test_stores_and_testing_are_independent_of_the_runtime() -> None:
    runtime = {"run", "executors", "scheduler", "controller", "plane", "pipeline", "task_api"}
    for package in ("stores", "testing"):
        assert ALLOWED[package] & runtime == set(), package
    assert "stores" in ALLOWED["testing"]  # the contract suite drives a store


def test_a_run_drives_its_executors_never_the_reverse() -> None:
    assert "executors" in ALLOWED["run"]
    assert "run" not in ALLOWED["executors"]
    run_imports = {name for path in (ROOT / "run").rglob("*.py") for name in imports_of(path)}
    assert any(name.startswith("chongming.executors") for name in run_imports)


def test_the_controller_takes_only_the_store_port() -> None:
    # The payload limit check lives in the state model, where stores read it too;
    # backends come to the controller through the control plane (open_store).
    assert {rule for rule in ALLOWED["controller"] if rule.split(".")[0] == "stores"} == {
        "stores.base",
        "stores.children",
        "stores.durable",
        "stores.granted",
        "stores.limits",
        "stores.nodes",
        "stores.queue",
        "stores.retention",
        "stores.rates",
        "stores.schedules",
        "stores.writes",
    }
    assert not allows(ALLOWED["controller"], ["stores", "sqlite"])
    assert not allows(ALLOWED["controller"], ["stores", "checks"])
    defined = [
        path.relative_to(ROOT)
        for path in modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "check_limit"
    ]
    assert [str(path) for path in defined] == ["state/payload.py"]


def test_the_checker_sees_what_it_must_refuse() -> None:
    # A contract test that cannot fail proves nothing: feed it known bad imports.
    tree = {"executors": "chongming.run", "stores": "chongming.scheduler.admission"}
    for top, name in tree.items():
        assert not allows(ALLOWED[top], name.split(".")[1:]), (top, name)
    assert allows(frozenset({"stores.base"}), ["stores", "base", "Command"])
    assert not allows(frozenset({"stores.base"}), ["stores", "memory"])


def test_pure_layers_import_no_asyncio_driver_thread_or_clock() -> None:
    problems = []
    for path in modules():
        if top_of(path) not in PURE:
            continue
        for name in imports_of(path):
            if name.split(".")[0] in FORBIDDEN_IN_PURE or name in FORBIDDEN_IN_PURE:
                problems.append(f"{path.relative_to(ROOT)} imports {name}")
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
