"""``TaskRegistry``: the allow-list of task names a controller will run.

Anything that starts a task from outside the process (CLI, commands, a
dashboard) passes a registered name plus JSON arguments; a path that starts an
arbitrary callable would be remote code execution.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Collection, Iterator
from types import ModuleType
from typing import Any

from chongming.errors import ConfigurationError, UnknownTask
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.task_api.spec import SPEC_ATTRIBUTE, ExecutorChoice, TaskSpec, build_spec

__all__ = ["TaskRegistry", "check_task_name"]

MAX_NAME_LENGTH = 200
_VERSION_SUFFIX = re.compile(r"@\d+$")


def check_task_name(name: object) -> str:
    if not isinstance(name, str):
        raise ConfigurationError(f"task names are strings, got {type(name).__name__}")
    if not name or len(name) > MAX_NAME_LENGTH:
        raise ConfigurationError(f"task names have 1 to {MAX_NAME_LENGTH} characters")
    if not name.isprintable() or name != name.strip():
        raise ConfigurationError(f"task name {name!r} contains whitespace or control characters")
    if _VERSION_SUFFIX.search(name):
        raise ConfigurationError(
            f"task name {name!r} ends in @<digits>, which reads as a version (name@N); "
            "register the name with version= instead"
        )
    return name


class TaskRegistry:
    """Registered name -> :class:`TaskSpec`. Registering a name twice is an error."""

    __slots__ = ("_specs", "_versions")

    def __init__(self) -> None:
        self._specs: dict[str, TaskSpec] = {}  # name -> its highest version (or the only spec)
        self._versions: dict[str, dict[int | None, TaskSpec]] = {}

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        tags: Collection[str] | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        executor: ExecutorChoice | None = None,
        priority: int | None = None,
        version: int | None = None,
        durable: bool | None = None,
        max_resumes: int | None = None,
    ) -> TaskSpec:
        """Register ``fn`` under ``name`` (``name@version``); options override the ``@task`` spec.

        Several versions of one name may be registered side by side (a worker
        keeps serving the old one while its queued tasks drain); a name is
        either versioned or not, never both.
        """
        check_task_name(name)
        if not callable(fn):
            raise ConfigurationError(
                f"cannot register {name!r}: {type(fn).__name__} object is not callable"
            )
        base = getattr(fn, SPEC_ATTRIBUTE, None)
        base = base if isinstance(base, TaskSpec) else None
        spec = build_spec(
            fn,
            name=name,
            tags=tags if tags is not None else (base.tags if base else ()),
            retry=retry if retry is not None else (base.retry if base else None),
            timeout=timeout if timeout is not None else (base.timeout if base else None),
            executor=executor if executor is not None else (base.executor if base else None),
            priority=priority if priority is not None else (base.priority if base else 0),
            version=version if version is not None else (base.version if base else None),
            durable=durable if durable is not None else (base.durable if base else False),
            max_resumes=max_resumes
            if max_resumes is not None
            else (base.max_resumes if base and base.durable else None),
            schedule=base.schedule if base else None,
            timezone=base.timezone if base else None,
        )
        known = self._versions.get(name, {})
        if spec.version in known:
            shown = name if spec.version is None else f"{name}@{spec.version}"
            raise ConfigurationError(f"task name {shown!r} is already registered")
        if known and (spec.version is None or None in known):
            raise ConfigurationError(
                f"task name {name!r} is registered both with and without a version; "
                "give every registration of a versioned name its version"
            )
        self._versions.setdefault(name, {})[spec.version] = spec
        current = self._specs.get(name)
        if current is None or (spec.version or 0) > (current.version or 0):
            self._specs[name] = spec
        return spec

    def register_module(self, module: ModuleType) -> list[str]:
        """Register every ``@task`` function defined in ``module`` under its spec name."""
        names: list[str] = []
        for _, value in inspect.getmembers(module):
            spec = getattr(value, SPEC_ATTRIBUTE, None)
            if not isinstance(spec, TaskSpec):
                continue
            if getattr(value, "__module__", None) != module.__name__:
                continue  # imported from elsewhere: that module registers it
            self.register(spec.name, value)
            names.append(spec.name)
        return sorted(names)

    def get(self, name: str, version: int | None = None) -> TaskSpec:
        """The spec of ``name`` (its highest version), or of ``name@version``."""
        try:
            spec = self._specs[name]
        except (KeyError, TypeError):
            raise UnknownTask(str(name), tuple(sorted(self._specs))) from None
        if version is None or spec.version == version:
            return spec
        found = self._versions[name].get(version)
        if found is None:
            served = ", ".join(str(v) for v in self.versions(name))
            raise UnknownTask(f"{name}@{version}", (f"{name}@{served}",))
        return found

    def versions(self, name: str) -> tuple[int | None, ...]:
        """The registered versions of ``name``, lowest first (``(None,)``: unversioned)."""
        known = self._versions.get(name, {})
        return tuple(sorted(known, key=lambda v: -1 if v is None else v))

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))
