"""Typed LLM operations (inspect_ai/distilabel style).

Every LLM-backed step is an Operation: a name, a pydantic output schema, a versioned prompt
template per language in `prompts/<lang>/<name>.j2`, and a deterministic `rules` backend.
The prompt file's hash is the operation's prompt version and enters stage cache keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Callable, Mapping

from pydantic import BaseModel

OPERATIONS: dict[str, "Operation"] = {}

SYSTEM = {
    "ko": "당신은 금융 RAG 벤치마크를 만드는 신중한 전문가입니다. 요청한 JSON 스키마에 맞는 JSON 객체 하나만 답하세요.",
    "en": "You are a careful expert building a financial RAG benchmark. Reply with one JSON object that "
    "matches the requested schema, and nothing else.",
}


@lru_cache(maxsize=1)
def _jinja():
    import jinja2

    # StrictUndefined: a template naming an input the caller does not pass is a bug, not an empty string.
    return jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)


@dataclass(frozen=True)
class Operation:
    name: str
    output: type[BaseModel]
    rules: Callable[..., BaseModel]
    # The system line per language, when the operation must not be told it builds a benchmark
    # (the probe's target replies as an assistant would to a customer); None: SYSTEM.
    system: Mapping[str, str] | None = None

    def system_line(self, lang: str) -> str:
        return (self.system or SYSTEM)[lang]

    def template(self, lang: str) -> str:
        return (resources.files("finhallu") / "prompts" / lang / f"{self.name}.j2").read_text("utf-8")

    def prompt_version(self) -> str:
        return prompt_version(self.name)

    def render(self, lang: str, inputs: dict) -> tuple[tuple[str, str], ...]:
        """(role, content) messages for the `llm` backend: a system line and the rendered template."""
        lang = lang if lang in SYSTEM else "en"
        user = _compiled(self.name, lang).render(**inputs).strip()
        return (("system", self.system_line(lang)), ("user", user))


# Package templates do not change while a process runs (as for codeversion.code_hash): read, compile
# and hash each once, not on every one of a stage's thousands of calls.
@lru_cache(maxsize=None)
def _compiled(name: str, lang: str):
    return _jinja().from_string(OPERATIONS[name].template(lang))


def operation(name: str, output: type[BaseModel], system: Mapping[str, str] | None = None):
    """Register the decorated function as the operation's rules backend."""

    def deco(fn):
        OPERATIONS[name] = Operation(name, output, fn, system)
        return fn

    return deco


def prompt_versions(names: tuple[str, ...]) -> dict[str, str]:
    return {n: prompt_version(n) for n in names}


@lru_cache(maxsize=None)
def prompt_version(name: str) -> str:
    """Hash of the operation's prompt templates and system line (all languages): its prompt version."""
    h = hashlib.sha256()
    for lang in ("ko", "en"):
        f = resources.files("finhallu") / "prompts" / lang / f"{name}.j2"
        h.update(f.read_bytes() if f.is_file() else b"")
        h.update(OPERATIONS[name].system_line(lang).encode() if name in OPERATIONS else SYSTEM[lang].encode())
    return h.hexdigest()[:16]
