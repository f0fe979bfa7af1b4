"""Worker pools: which queued tasks a worker claims (``--names``, ``--tags``, ``--versions``).

A fleet splits its work by giving each worker a pool: payments workers claim
only tasks tagged ``payments``, the rest of the fleet everything else. Every
filter narrows what the worker would claim anyway (what it registered):

- ``names``: only these registered names;
- ``versions``: for each name given (``"charge@2"``), only these versions of
  it; other names are untouched;
- ``tags``: only tasks that carry at least one of these tags;
- ``exclude_tags``: never a task that carries one of these tags.

Tags are matched on the tags stored with the task, in the claim itself (the
store filters, so a worker never takes a task only to hand it back).
``Controller.enqueue`` stores the registration's tags with the task when the
enqueuing process has the name registered; an enqueue by name only stores
the tags it is given (``enqueue(..., tags=...)``). A task is never stranded
by the two sides disagreeing: a pool's ``tags`` and the rest's
``exclude_tags`` read the same stored tags.

Within a pool the claim order is the store's: higher priority first, then
the oldest. With ``age_step`` (seconds, off by default) it is by *effective*
priority ``priority + floor(waited / age_step)``, then the oldest, so a task
gains a level per step it waits and a flood of higher priority work cannot
starve it forever (see docs/pools.md).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping

from chongming.errors import ConfigurationError, PayloadError
from chongming.state.payload import valid_version
from chongming.stores.queue import Serves, check_age_step, check_exclude_tags

__all__ = ["AGE_STEP", "WorkerPool", "check_pool", "parse_versions"]

#: What the docs suggest for a pool with mixed priorities: one level per minute waited.
#: Off by default, so a worker's claim keeps the strict statement (and its speed).
AGE_STEP: float | None = None

_VERSIONED = re.compile(r"^(?P<name>.+)@(?P<version>[0-9]+)$")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerPool:
    """What a worker claims beyond what it registered; ``None``: no filter.

    ``names``/``tags``/``exclude_tags`` are collections of strings,
    ``versions`` of ``"name@N"`` texts (``["charge@2"]``); they are checked
    when the pool is made (:func:`check_pool` says what is refused) and kept
    as frozensets.
    """

    names: Collection[str] | None = None
    tags: Collection[str] | None = None
    exclude_tags: Collection[str] | None = None
    versions: Collection[str] | None = None
    #: Seconds of waiting worth one priority level (``None``: strict priority, never aged).
    age_step: float | None = AGE_STEP
    #: ``versions`` read: name -> the versions of it this worker claims.
    pinned: Mapping[str, frozenset[int]] | None = dataclasses.field(
        init=False, default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for field, value in _checked(self).items():
            object.__setattr__(self, field, value)

    @property
    def excluded(self) -> frozenset[str]:
        return frozenset(self.exclude_tags or ())

    def restrict(self, serves: Serves) -> Serves:
        """``serves`` (name -> registered versions) less what this pool leaves alone."""
        names, pinned = self.names, self.pinned
        if names is None and pinned is None:
            return serves
        kept: dict[str, Collection[int | None]] = {}
        for name, registered in serves.items():
            if names is not None and name not in names:
                continue
            if pinned is not None and name in pinned:
                wanted = pinned[name]
                registered = [v for v in registered if v in wanted]
            if registered:
                kept[name] = registered
        return kept

    def describe(self) -> str:
        """The pool as the worker's start-up line names it ("" when it claims everything)."""
        parts = []
        if self.names is not None:
            parts.append("names " + ",".join(sorted(self.names)))
        if self.versions is not None:
            parts.append("versions " + ",".join(sorted(self.versions)))
        if self.tags is not None:
            parts.append("tags " + ",".join(sorted(self.tags)))
        if self.exclude_tags is not None:
            parts.append("excluding tags " + ",".join(sorted(self.exclude_tags)))
        if self.age_step != AGE_STEP:
            parts.append(f"aging every {self.age_step:g}s")
        return "; ".join(parts)


def parse_versions(items: object) -> dict[str, frozenset[int]]:
    """``["charge@2", "charge@3", "refund@1"]`` as name -> versions; else ``ConfigurationError``."""
    if isinstance(items, str) or not isinstance(items, Collection):
        raise ConfigurationError(
            f"versions must be a collection of 'name@N' texts, got {type(items).__name__}"
        )
    found: dict[str, set[int]] = {}
    for item in items:
        match = _VERSIONED.match(item) if isinstance(item, str) else None
        version = int(match["version"]) if match else -1
        if match is None or not valid_version(version):
            raise ConfigurationError(
                f"versions: {item!r} is not 'name@N' with N a version from 0 (e.g. charge@2)"
            )
        found.setdefault(match["name"], set()).add(version)
    return {name: frozenset(versions) for name, versions in found.items()}


def _tag_set(value: object, field: str) -> frozenset[str]:
    try:
        return frozenset(check_exclude_tags(value, field))
    except PayloadError as error:
        raise ConfigurationError(str(error)) from None


def check_pool(
    *,
    names: object = None,
    tags: object = None,
    exclude_tags: object = None,
    versions: object = None,
    age_step: object = AGE_STEP,
) -> WorkerPool:
    """``WorkerPool(...)`` from values of any type; every fault a :class:`ConfigurationError`.

    ``None`` means no filter. An empty filter is refused, naming the field
    (it would claim nothing, or exclude nothing, and a worker that silently
    claims nothing is a stuck queue), as are names or tags that are not
    non-empty strings and versions that are not ``name@N``.
    """
    return WorkerPool(
        names=names,  # type: ignore[arg-type]
        tags=tags,  # type: ignore[arg-type]
        exclude_tags=exclude_tags,  # type: ignore[arg-type]
        versions=versions,  # type: ignore[arg-type]
        age_step=age_step,  # type: ignore[arg-type]
    )


def _checked(pool: WorkerPool) -> dict[str, object]:
    """The pool's fields as kept (frozensets), or the first fault as a ConfigurationError."""
    checked: dict[str, object] = {}
    names = pool.names
    if names is not None:
        if isinstance(names, str) or not isinstance(names, Collection):
            raise ConfigurationError(
                f"names must be a collection of task names, got {type(names).__name__}"
            )
        if any(not isinstance(name, str) or not name.strip() for name in names):
            raise ConfigurationError(
                f"names holds non-empty strings, got {sorted(map(repr, names))}"
            )
        checked["names"] = frozenset(names)
    if pool.tags is not None:
        checked["tags"] = _tag_set(pool.tags, "tags")
    if pool.exclude_tags is not None:
        checked["exclude_tags"] = _tag_set(pool.exclude_tags, "exclude_tags")
    try:
        checked["age_step"] = check_age_step(pool.age_step)
    except PayloadError as error:
        raise ConfigurationError(str(error)) from None
    if pool.versions is not None:
        pinned = parse_versions(pool.versions)
        checked["versions"] = frozenset(f"{n}@{v}" for n, vs in pinned.items() for v in vs)
        checked["pinned"] = pinned
    for field, value in checked.items():
        if not value and field != "age_step":
            what = {"names": "name", "versions": "version"}.get(field, "tag")
            raise ConfigurationError(
                f"{field} is empty: a pool filter must name at least one {what} "
                "(leave it out to claim whatever this worker registered)"
            )
    return checked
