"""A tiny typed registry: duplicates raise, a miss lists the known names.

Third parties add entries with `REGISTRY.register("name")(fn)` or, from an installed package, through
an entry point group that the caller loads explicitly with `load_entry_points` (no import-time
side effects).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Generic, TypeVar

from agentic_rl.errors import ConfigError, UnknownName

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        def add(fn: F) -> F:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = fn
            return fn

        return add

    def get(self, name: str) -> F:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self._items))}") from None

    __getitem__ = get

    def names(self) -> list[str]:
        return sorted(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __len__(self) -> int:
        return len(self._items)

    def load_entry_points(self, group: str) -> list[str]:
        """Register every entry point of `group` (e.g. "agentic_rl.advantages") under its name.

        Returns the names added. A name that is already registered raises, as with `register`.
        """
        added = []
        for ep in metadata.entry_points(group=group):
            self.register(ep.name)(ep.load())
            added.append(ep.name)
        return added


def load_callable(spec: str, key: str = "rollout.agent.program") -> Callable:
    """What a recipe names as `module:function` or `path/to/file.py:function` (a class too:
    `rollout.backend`); `key`, the recipe key, names it in the errors (ConfigError). A module is
    looked up on the path and then in the working directory, where a user's module sits beside the
    recipe."""
    target, _, name = str(spec).rpartition(":")
    if not target or not name:
        raise ConfigError(f"{key}: expected 'module:function' or 'file.py:function', got {spec!r}")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        if module_spec is None or not Path(target).exists():
            raise ConfigError(f"{key}: no such file {target!r}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        if importlib.util.find_spec(target.split(".")[0]) is None and str(Path.cwd()) not in sys.path:
            sys.path.append(str(Path.cwd()))
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            raise ConfigError(f"{key}: cannot import {target!r} ({e})") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(f"{key}: {target!r} has no function {name!r}")
    return fn
