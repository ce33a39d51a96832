"""LLM providers, one module each, registered by decorator and imported lazily."""

from __future__ import annotations

import importlib

PROVIDERS: dict[str, object] = {}


def register_provider(name: str):
    def deco(cls):
        PROVIDERS[name] = cls()
        return cls

    return deco


def get_provider(name: str):
    if name not in PROVIDERS:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            raise KeyError(f"unknown LLM provider {name!r}") from None
    return PROVIDERS[name]
