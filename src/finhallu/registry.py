"""Lazy plugin registries: a package whose modules register themselves when imported."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

T = TypeVar("T")


def lookup(registry: dict[str, T], name: str, package: str, kind: str, helpers: tuple[str, ...] = ()) -> T:
    """registry[name], importing every plugin module of `package` first if the name is missing
    (not only when the registry is empty: a module imported directly must not hide the others)."""
    if name not in registry:
        load_plugins(package, helpers)
    if name not in registry:
        raise KeyError(f"unknown {kind} {name!r}; registered: {sorted(registry)}")
    return registry[name]


def load_plugins(package: str, helpers: tuple[str, ...] = ()) -> None:
    pkg = importlib.import_module(package)
    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.name.startswith("_") and mod.name not in helpers:
            importlib.import_module(f"{package}.{mod.name}")
