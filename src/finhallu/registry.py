"""One generic plug-in registry: a package whose modules register themselves when imported.

Every extension point (sources, embedders, injectors, detectors, external formats, LLM
providers) is a `Registry` over its package. A plug-in is one module of that package that calls
`REGISTRY.add(name, item)` (usually through a decorator) at import time; lookups import the
package's modules lazily, so heavy dependencies load only when a plug-in is used, and config and
CLI take their choices from `names()`.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


class UnknownPluginError(KeyError, ValueError):
    """A name no plug-in of the package registered; the message lists the known ones. A ValueError
    too, so a config validator that looks a name up reports it as a validation error."""

    def __str__(self) -> str:  # KeyError quotes its argument; this one is a sentence
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    def __init__(self, kind: str, package: str):
        self.kind = kind  # what a plug-in is, in words ("detector", "source kind", ...)
        self.package = package
        self._items: dict[str, T] = {}
        self._origins: dict[str, str] = {}  # name -> the module that registered it
        self._order: dict[str, int] = {}  # name -> registration sequence
        self._loaded = False
        self._lock = threading.RLock()

    def add(self, name: str, item: T, origin: str) -> T:
        """Register `item` as `name`; `origin` is the registering module (a reload may register again)."""
        with self._lock:
            if self._origins.get(name, origin) != origin:
                raise ValueError(f"{self.kind} {name!r} registered twice ({self._origins[name]} and {origin})")
            self._items[name], self._origins[name] = item, origin
            self._order.setdefault(name, len(self._order))
        return item

    def register(self, name: str):
        """Decorator registering the decorated class or function itself."""

        def deco(obj):
            self.add(name, obj, obj.__module__)
            return obj

        return deco

    def get(self, name: str) -> T:
        """The plug-in registered as `name`: its own module first (`<package>.<name>`), then every
        module of the package (a module may register several names, or a name unlike its own)."""
        if name not in self._items:
            self._import(f"{self.package}.{name}")
        if name not in self._items:
            self.load()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownPluginError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        self.load()
        return sorted(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        self.load()
        yield from sorted(self._items.items())

    def in_order(self) -> list[T]:
        """Every plug-in by registering module, then in the order that module registered them: the
        same order whichever module happened to be imported first."""
        self.load()
        return [self._items[n] for n in sorted(self._items, key=lambda n: (self._origins[n], self._order[n]))]

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._items

    def load(self) -> None:
        """Import every module of the package (once): all plug-ins are then registered."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            pkg = importlib.import_module(self.package)
            for mod in pkgutil.iter_modules(pkg.__path__):
                if not mod.name.startswith("_"):
                    importlib.import_module(f"{self.package}.{mod.name}")
            self._loaded = True

    @staticmethod
    def _import(module: str) -> None:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the plug-in exists but one of its imports is missing: say so
                raise
