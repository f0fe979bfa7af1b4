"""Every public coroutine of ``Controller`` and ``TaskRun`` has a blocking twin.

The coroutines are discovered by inspection, never listed here, so a method
added to either class fails this test until ``chongming/blocking/facade.py`` gives
it a twin (one line: ``name = blocking_twin(Controller.name)``). A twin keeps
the parameters (names, kinds, defaults, annotations) and the docstring of
what it mirrors; a hand-written twin may only add to the docstring.
"""

from __future__ import annotations

import inspect
import pydoc
import typing
from collections.abc import Callable
from typing import Any

import pytest

from chongming import Controller, TaskRun
from chongming.blocking import BlockingController, BlockingQueuedTask, BlockingTaskRun
from chongming.controller.queued import QueuedTask
from chongming.controller.stored_handle import StoredPipeline

PAIRS: list[tuple[type, type]] = [
    (Controller, BlockingController),
    (TaskRun, BlockingTaskRun),
    (QueuedTask, BlockingQueuedTask),
]
#: Coroutines with no twin, and why.
WITHOUT_TWIN: dict[tuple[type, str], str] = {
    (Controller, "start"): "the facade starts its controller when it is built",
    (Controller, "submit_pipeline"): "no blocking pipeline handle yet (issue 12 follow-up)",
    (Controller, "stored_pipeline"): "no blocking StoredPipeline handle yet (node/view/stop)",
    (Controller, "enqueue_child"): "the runtime's: ctx.spawn calls it on the loop of its task",
}
#: Plain methods the facade still carries to the loop thread (not discoverable as coroutines).
LOOP_METHODS: dict[type, list[str]] = {Controller: ["register", "register_module", "run_for"]}
#: Async handles become sync handles.
RETURNS = {
    "TaskRun": "BlockingTaskRun",
    TaskRun: BlockingTaskRun,
    "QueuedTask": "BlockingQueuedTask",
    QueuedTask: BlockingQueuedTask,
    # enqueue_pipeline's twin: the coordinator's wait / result / get (not node/view/stop yet)
    "StoredPipeline": "BlockingQueuedTask",
    StoredPipeline: BlockingQueuedTask,
}


def public_coroutines(cls: type) -> dict[str, Callable[..., Any]]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }


def cases() -> list[tuple[type, type, str]]:
    found = [
        (async_cls, sync_cls, name)
        for async_cls, sync_cls in PAIRS
        for name in [*public_coroutines(async_cls), *LOOP_METHODS.get(async_cls, [])]
        if (async_cls, name) not in WITHOUT_TWIN
    ]
    assert len(found) >= 15, found  # discovery works: the classes' methods were seen
    return found


def parameters(fn: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """(name, kind, default, annotation) of every parameter but ``self``."""
    listed = list(inspect.signature(fn).parameters.values())
    assert listed[0].name == "self", fn
    return [(p.name, p.kind, p.default, p.annotation) for p in listed[1:]]


@pytest.mark.parametrize(
    ("async_cls", "sync_cls", "name"),
    cases(),
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_each_method_has_a_blocking_twin_with_its_signature_and_docstring(
    async_cls: type, sync_cls: type, name: str
) -> None:
    method = getattr(async_cls, name)
    twin = getattr(sync_cls, name, None)
    assert twin is not None, f"{sync_cls.__name__} has no twin of {async_cls.__name__}.{name}"
    assert inspect.isfunction(twin), f"{sync_cls.__name__}.{name} is not a plain method"
    assert not inspect.iscoroutinefunction(twin), f"{sync_cls.__name__}.{name} is a coroutine"

    assert parameters(twin) == parameters(method)
    returns = inspect.signature(method).return_annotation
    assert inspect.signature(twin).return_annotation == RETURNS.get(returns, returns)
    # The annotations resolve to the same objects (get_type_hints is what tools use).
    hints = typing.get_type_hints(method)
    hints["return"] = RETURNS.get(hints["return"], hints["return"])
    assert typing.get_type_hints(twin) == hints

    theirs = inspect.cleandoc(method.__doc__ or "")
    ours = inspect.cleandoc(twin.__doc__ or "")
    assert ours == theirs or ours.startswith(theirs + "\n\n"), (
        f"{sync_cls.__name__}.{name} must keep {async_cls.__name__}.{name}'s docstring"
    )
    # help() shows the twin under its own name, with the mirrored signature.
    assert twin.__qualname__ == f"{sync_cls.__name__}.{name}"
    rendered = pydoc.plain(pydoc.render_doc(twin))
    assert f"{name}{inspect.signature(twin)}" in rendered


def test_the_exemptions_are_still_coroutines() -> None:
    """An exemption whose coroutine is gone (or became a twin) must leave the list."""
    for (cls, name), why in WITHOUT_TWIN.items():
        assert name in public_coroutines(cls), f"{cls.__name__}.{name} ({why}) is gone"
        assert not hasattr(BlockingController, name), f"{name} has a twin now: drop it"
