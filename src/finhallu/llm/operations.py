"""Typed LLM operations (inspect_ai/distilabel style).

Every LLM-backed step is an Operation: a name, a pydantic output schema, a versioned prompt
template per language in `prompts/<lang>/<name>.j2`, and a deterministic `rules` backend.
The prompt file's hash is the operation's prompt version and enters stage cache keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Callable

from pydantic import BaseModel

OPERATIONS: dict[str, "Operation"] = {}


@dataclass(frozen=True)
class Operation:
    name: str
    output: type[BaseModel]
    rules: Callable[..., BaseModel]

    def template(self, lang: str) -> str:
        return (resources.files("finhallu") / "prompts" / lang / f"{self.name}.j2").read_text("utf-8")

    def prompt_version(self) -> str:
        return prompt_version(self.name)


def operation(name: str, output: type[BaseModel]):
    """Register the decorated function as the operation's rules backend."""

    def deco(fn):
        OPERATIONS[name] = Operation(name, output, fn)
        return fn

    return deco


def prompt_versions(names: tuple[str, ...]) -> dict[str, str]:
    return {n: prompt_version(n) for n in names}


def prompt_version(name: str) -> str:
    """Hash of the operation's prompt templates (all languages): its prompt version."""
    h = hashlib.sha256()
    for lang in ("ko", "en"):
        f = resources.files("finhallu") / "prompts" / lang / f"{name}.j2"
        h.update(f.read_bytes() if f.is_file() else b"")
    return h.hexdigest()[:16]
