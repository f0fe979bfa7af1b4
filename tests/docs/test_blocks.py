"""Every Python block in docs/*.md and the README is checked, one way or another.

A block is checked in one of three ways, chosen by an HTML comment on the line
right above its fence (invisible once rendered):

``<!-- include: docs/examples/x.py -->``
    The block is a contiguous excerpt of that file, line for line: the file
    runs in the suite, so the excerpt is code that runs.
``<!-- signature: chongming.Name -->``
    The block states a signature (``Name(a, *, b=1.0)``) or a class's fields
    and methods; it must agree with the real object (names, order, kinds,
    defaults, ``async``).
``<!-- calls: chongming.Name -->``
    The block uses ``Name`` with values that cannot run here (a server's
    address); it must compile, and each call of ``Name`` must bind to the
    real signature.

A block without a comment is **run**: a page's blocks run in order in one
fresh interpreter (``tests/docs/run_blocks.py``), sharing one namespace,
with top-level ``await`` allowed and warnings as errors. What the page
assumes the reader already has (a task function named in the prose) is its
prelude below.

Pages owned by other areas may not carry the comments yet: ``MARKS`` names
those blocks by their first line. Move a mark into the page when you edit it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
RUNNER = Path(__file__).with_name("run_blocks.py")

_FENCE = re.compile(r"^```(python|py)\s*$")
_MARK = re.compile(r"^<!--\s*(include|signature|calls):\s*(\S+)\s*-->$")

#: Marks for blocks on pages that do not carry the comment yet: (page, first line) -> mark.
MARKS: dict[tuple[str, str], tuple[str, str]] = {
    ("docs/retries-and-timeouts.md", "RetryPolicy("): ("signature", "chongming.RetryPolicy"),
    ("docs/retries-and-timeouts.md", "ExponentialBackoff(base=1.0, factor=2.0,"): (
        "signature",
        "chongming.ExponentialBackoff",
    ),
    ("docs/retries-and-timeouts.md", "Timeout(per_attempt=None, idle=None,"): (
        "signature",
        "chongming.Timeout",
    ),
    ("docs/stores.md", "SqliteTaskStore(path, *, busy_timeout=5.0,"): (
        "signature",
        "chongming.SqliteTaskStore",
    ),
    ("docs/stores_postgres.md", "from chongming.stores.postgres import PostgresTaskStore"): (
        "calls",
        "chongming.stores.postgres.PostgresTaskStore",
    ),
}

_TASKS = """
import asyncio, time
from chongming import TaskContext, task

@task
async def extract(ctx: TaskContext, day: str, **hints: object) -> list[str]:
    await ctx.checkpoint()
    return [f"{day}/part0"]
"""

#: What each page assumes its reader already has. Blocks run after it.
PRELUDES: dict[str, str] = {
    "docs/stop-pause-resume.md": """
import time
from chongming import TaskContext

def sync_rows(ctx: TaskContext, tenant: str) -> int:
    rows = 0
    while True:  # until stopped
        ctx.checkpoint()
        rows += 1
        time.sleep(0.001)
""",
    "docs/controller.md": _TASKS + "from chongming import Controller, RetryPolicy, Timeout\n",
    "docs/embedding.md": """
import asyncio, os, signal, types
from chongming import TaskContext, task
from chongming.blocking import BlockingController

def days_to_process() -> list[str]:
    return ["2026-10-01", "2026-10-02"]

told: list[str] = []

@task
async def extract(ctx: TaskContext, day: str) -> str:
    await ctx.checkpoint()
    if day == "2026-10-02" and not told:
        told.append(day)
        os.kill(os.getpid(), signal.SIGTERM)  # the worker is told to go
        while True:  # until main() is cancelled and the controller stops it
            await ctx.checkpoint()
            await asyncio.sleep(0.001)
    return day

def resize(ctx: TaskContext, image: str) -> str:
    return image

resize.__module__ = "my_tasks"  # as if defined in a module of its own
my_tasks = types.ModuleType("my_tasks")
my_tasks.resize = task(resize)
assert not hasattr(my_tasks, "extract")
""",
    "docs/executors.md": "def fn(ctx):\n    ctx.checkpoint()\n    return 1\n"
    "from chongming import InlineExecutor, run_task\n",
    "docs/retries-and-timeouts.md": """
async def flaky_task(ctx) -> str:
    if ctx.attempt < 2:
        raise ConnectionError("the first attempt fails")
    return "ok"
""",
    "docs/writing-tasks.md": "from chongming import RetryPolicy, Timeout\n",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the first line inside the fence
    source: str
    mark: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    page = path.relative_to(ROOT).as_posix()
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        if not _FENCE.match(lines[index].strip()):
            index += 1
            continue
        indent = len(lines[index]) - len(lines[index].lstrip())
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        source = textwrap.dedent("\n".join(line[indent:] for line in lines[index + 1 : end]))
        above = lines[index - 1].strip() if index else ""
        match = _MARK.match(above)
        mark = (match.group(1), match.group(2)) if match else None
        first = source.strip().splitlines()[0] if source.strip() else ""
        for (marked_page, start), foreign in MARKS.items():
            if marked_page == page and first.startswith(start):
                assert mark is None, f"{page}: the page marks this block; drop it from MARKS"
                mark = foreign
        found.append(Block(page, index + 1, source + "\n", mark))
        index = end + 1
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def resolve(dotted: str) -> Any:
    module, _, attribute = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except ModuleNotFoundError:  # a method: chongming.TaskContext.progress
        return getattr(resolve(module), attribute)


# -- include ------------------------------------------------------------------


def check_include(block: Block, target: str) -> None:
    path = ROOT / target
    assert path.is_file(), f"{block.where}: includes {target}, which does not exist"
    wanted = [line.rstrip() for line in textwrap.dedent(block.source).strip("\n").splitlines()]
    have = [line.rstrip() for line in path.read_text().splitlines()]
    for start in range(len(have) - len(wanted) + 1):
        # an excerpt from inside a function may be shown dedented
        window = textwrap.dedent("\n".join(have[start : start + len(wanted)])).splitlines()
        if window == wanted:
            return
    pytest.fail(f"{block.where}: the block is not a contiguous excerpt of {target}")


# -- signature ----------------------------------------------------------------


def real_defaults(obj: Any) -> dict[str, Any]:
    """Default of each parameter; a dataclass factory is called for its value."""
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(obj).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    if dataclasses.is_dataclass(obj):
        for field in dataclasses.fields(obj):
            if field.default_factory is not dataclasses.MISSING:
                defaults[field.name] = field.default_factory()
    return defaults


def check_parameters(where: str, obj: Any, written: ast.arguments, skip_self: bool) -> None:
    real = list(inspect.signature(obj).parameters.values())
    if skip_self and real and real[0].name == "self":
        real = real[1:]
    names = [parameter.name for parameter in real]
    shown = [*written.posonlyargs, *written.args]
    if skip_self and shown and shown[0].arg == "self":
        shown = shown[1:]
    keyword_only = {argument.arg for argument in written.kwonlyargs}
    order = [argument.arg for argument in [*shown, *written.kwonlyargs]]
    assert set(order) <= set(names), f"{where}: unknown parameters {set(order) - set(names)}"
    assert order == [name for name in names if name in order], f"{where}: order {order}"
    # ``a`` (no default) reads as positional; ``a=1`` before ``*`` may be either.
    bare = {argument.arg for argument in shown[: len(shown) - len(written.defaults)]}
    for parameter in real:
        if parameter.name in keyword_only:
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, f"{where}: {parameter}"
        elif parameter.name in bare or (
            parameter.name in order and (written.kwonlyargs or written.vararg)
        ):
            assert parameter.kind is not inspect.Parameter.KEYWORD_ONLY, f"{where}: {parameter}"
    with_defaults = [argument.arg for argument in shown][len(shown) - len(written.defaults) :]
    positional_defaults = dict(zip(with_defaults, written.defaults, strict=True))
    keyword_defaults = {
        argument.arg: default
        for argument, default in zip(written.kwonlyargs, written.kw_defaults, strict=True)
        if default is not None
    }
    namespace = public_names()
    defaults = real_defaults(obj)
    for name, node in {**positional_defaults, **keyword_defaults}.items():
        value = eval(compile(ast.Expression(node), where, "eval"), dict(namespace))
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            continue  # "..." elides a default
        assert name in defaults, f"{where}: {name} has no default"
        assert value == defaults[name], f"{where}: {name}={value!r}, really {defaults[name]!r}"


def public_names() -> dict[str, Any]:
    """Every name of ``chongming.__all__`` (the package imports them lazily)."""
    package = importlib.import_module("chongming")
    return {name: getattr(package, name) for name in package.__all__}


def without_comments(source: str) -> str:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    kept = [token for token in tokens if token.type != tokenize.COMMENT]
    return tokenize.untokenize(kept)


def check_signature(block: Block, target: str) -> None:
    obj = resolve(target)
    try:
        tree: ast.Module | None = ast.parse(block.source)
    except SyntaxError:
        tree = None  # ``Name(a, *, b=1.0)``: a signature, not code
    if tree is not None and len(tree.body) == 1 and isinstance(tree.body[0], ast.ClassDef):
        check_class(block, obj, tree.body[0])
        return
    # ``Name(a, *, b=1.0)`` is not code; as the head of a ``def`` it is a signature.
    head = without_comments(block.source).strip()
    name, _, rest = head.partition("(")
    assert name.strip() == target.rpartition(".")[2], f"{block.where}: shows {name!r}"
    function = ast.parse(f"def {name.strip()}({rest}: ...")
    definition = function.body[0]
    assert isinstance(definition, ast.FunctionDef)
    check_parameters(block.where, obj, definition.args, skip_self=False)


def is_dataclass_type(obj: Any) -> bool:
    """``dataclasses.is_dataclass`` without narrowing ``obj`` for the type checker."""
    return inspect.isclass(obj) and dataclasses.is_dataclass(obj)


def check_dataclass_options(block: Block, obj: Any, decorator: ast.Call) -> None:
    assert is_dataclass_type(obj), f"{block.where}: {obj.__name__} is not a dataclass"
    params = vars(obj)["__dataclass_params__"]
    real = {
        "frozen": params.frozen,
        "slots": "__slots__" in vars(obj),
        "kw_only": all(field.kw_only for field in dataclasses.fields(obj)),
    }
    for keyword in decorator.keywords:
        assert keyword.arg in real, f"{block.where}: dataclass option {keyword.arg}"
        shown = ast.literal_eval(keyword.value)
        assert shown == real[keyword.arg], f"{block.where}: {keyword.arg}={shown}"


def check_class(block: Block, obj: Any, node: ast.ClassDef) -> None:
    assert node.name == obj.__name__, f"{block.where}: class {node.name}, really {obj.__name__}"
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "dataclass":
            check_dataclass_options(block, obj, decorator)
    annotations: dict[str, Any] = {}
    for klass in reversed(obj.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    fields = [statement for statement in node.body if isinstance(statement, ast.AnnAssign)]
    for statement in fields:
        assert isinstance(statement.target, ast.Name)
        name = statement.target.id
        assert name in annotations, f"{block.where}: {obj.__name__} has no field {name}"
        assert ast.unparse(statement.annotation) == str(annotations[name]), (
            f"{block.where}: {name}: {ast.unparse(statement.annotation)} vs {annotations[name]}"
        )
    if is_dataclass_type(obj):
        real = [field.name for field in dataclasses.fields(obj)]
        assert [s.target.id for s in fields if isinstance(s.target, ast.Name)] == real, (
            f"{block.where}: the fields of {obj.__name__} are {real}"
        )
        defaults = real_defaults(obj)
        namespace = public_names()
        for field in fields:
            if field.value is not None and isinstance(field.target, ast.Name):
                value = eval(compile(ast.Expression(field.value), block.where, "eval"), namespace)
                assert value == defaults[field.target.id], f"{block.where}: {field.target.id}"
    for member in node.body:
        if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
            method = getattr(obj, member.name, None)
            assert method is not None, f"{block.where}: {obj.__name__} has no {member.name}"
            is_async = isinstance(member, ast.AsyncFunctionDef)
            assert inspect.iscoroutinefunction(method) == is_async, (
                f"{block.where}: {member.name} async={is_async}"
            )
            check_parameters(block.where, method, member.args, skip_self=True)


# -- calls --------------------------------------------------------------------


def check_calls(block: Block, target: str) -> None:
    obj = resolve(target)
    short = target.rpartition(".")[2]
    compile(block.source, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    tree = ast.parse(block.source)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == short
    ]
    assert calls, f"{block.where}: never calls {short}"
    signature = inspect.signature(obj)
    unbound = inspect.isfunction(obj) and next(iter(signature.parameters), "") == "self"
    for call in calls:
        args = [None] * (len(call.args) + unbound)
        kwargs = {keyword.arg: None for keyword in call.keywords if keyword.arg}
        try:
            signature.bind(*args, **kwargs)
        except TypeError as error:
            pytest.fail(f"{block.where}: {ast.unparse(call)} does not fit: {error}")


# -- the tests ----------------------------------------------------------------


def test_the_pages_have_python_blocks_to_check() -> None:
    assert len(ALL_BLOCKS) >= 25
    assert any(block.page == "README.md" for block in ALL_BLOCKS)


def test_every_mark_names_a_block() -> None:
    pages = {block.page: block for block in ALL_BLOCKS}
    stale = []
    for page, start in MARKS:
        blocks = [b for b in ALL_BLOCKS if b.page == page]
        if page in pages and not any(b.source.strip().startswith(start) for b in blocks):
            stale.append((page, start))
        if page not in pages:
            stale.append((page, start))
    assert stale == [], "MARKS name blocks that are gone"
    assert set(PRELUDES) <= {block.page for block in ALL_BLOCKS}, "a prelude for no page"


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.mark is not None], ids=lambda block: block.where
)
def test_marked_block(block: Block) -> None:
    assert block.mark is not None
    kind, target = block.mark
    {"include": check_include, "signature": check_signature, "calls": check_calls}[kind](
        block, target
    )


RUN_PAGES = sorted({block.page for block in ALL_BLOCKS if block.mark is None})


@pytest.mark.parametrize("page", RUN_PAGES)
def test_the_blocks_of_a_page_run(page: str, tmp_path: Path) -> None:
    blocks = [block for block in ALL_BLOCKS if block.page == page and block.mark is None]
    request = {
        "prelude": PRELUDES.get(page, ""),
        "blocks": [{"where": b.where, "line": b.line, "source": b.source} for b in blocks],
    }
    env = {**os.environ, "PYTHONWARNINGS": "error", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [sys.executable, str(RUNNER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,  # a block that writes files writes them here
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


@pytest.mark.parametrize(
    ("kind", "target", "source"),
    [
        ("signature", "chongming.Timeout", "Timeout(per_attempt=5, idle=None)"),
        ("signature", "chongming.ExponentialBackoff", "ExponentialBackoff(base, factor=2.0)"),
        ("signature", "chongming.Transition", "class Transition:\n    task_id: int\n"),
        ("include", "docs/examples/quickstart.py", "print('not in the file')\n"),
        ("calls", "chongming.Timeout", "Timeout(per_attempt=1, forever=True)\n"),
    ],
)
def test_a_block_that_drifted_fails(kind: str, target: str, source: str) -> None:
    block = Block("docs/sample.md", 1, source, (kind, target))
    check = {"include": check_include, "signature": check_signature, "calls": check_calls}[kind]
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        check(block, target)
