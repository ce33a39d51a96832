"""LLM providers, one module each, registered by decorator and imported lazily."""

from __future__ import annotations

from finhallu.registry import Registry

PROVIDERS: Registry[object] = Registry("LLM provider", __name__)


def register_provider(name: str):
    def deco(cls):
        PROVIDERS.add(name, cls(), cls.__module__)
        return cls

    return deco


def get_provider(name: str):
    return PROVIDERS.get(name)
