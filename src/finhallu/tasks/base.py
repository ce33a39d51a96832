"""The stage contract: a pure function from input frames and a config to output frames.

No Prefect here. `flows/` wraps each Stage in a thin task (run -> gate -> publish -> TableRef).
"""

from __future__ import annotations

import ast
import hashlib
import logging
import importlib.util
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import polars as pl

Frames = dict[str, pl.DataFrame]


def stable_id(*parts: object, length: int = 16) -> str:
    """A content-derived id: the same parts give the same id in every build."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:length]


def rows_frame(rows: list[dict], sort_by: str | list[str], **kw) -> pl.DataFrame:
    """Rows -> a sorted frame; no rows -> an empty frame (the contract supplies the schema)."""
    return pl.DataFrame(rows, infer_schema_length=None, **kw).sort(sort_by) if rows else pl.DataFrame()


@dataclass
class StageContext:
    stage: str
    config: Any  # the stage's pydantic config section
    seed: int
    roles: dict[str, dict] = field(default_factory=dict)
    input_hashes: dict[str, str] = field(default_factory=dict)
    progress: Callable[[int, int], None] = lambda done, total: None
    # What a stage wants the people watching the run to know (a WARNING in the run's log).
    warn: Callable[[str], None] = lambda message: logging.getLogger("finhallu.stage").warning(message)
    # Content-addressed caches and artifacts under the home folder (embeddings by model and text
    # hash, FAISS indexes). Reading them never changes a stage's output, only its cost.
    cache_dir: Path | None = None
    # Other config sections the stage declares it reads (Stage.reads), by name; they enter its cache key.
    sections: dict[str, Any] = field(default_factory=dict)

    def rng(self, *salt: object) -> random.Random:
        """A seeded RNG per stage and salt, so results never depend on iteration order elsewhere."""
        h = hashlib.sha256(repr((self.seed, self.stage) + salt).encode()).digest()
        return random.Random(int.from_bytes(h[:8], "big"))


@dataclass(frozen=True)
class Stage:
    name: str
    fn: Callable[[Frames, StageContext], Frames]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    config_key: str
    roles: tuple[str, ...] = ()  # LLM roles the stage calls (their config enters the cache key)
    operations: tuple[str, ...] = ()  # LLM operations (their prompt versions enter the cache key)
    description: str = ""
    resources: tuple[str, ...] = ()  # package files the stage reads (templates): their bytes enter the cache key
    reads: tuple[str, ...] = ()  # other config sections the stage reads (StageContext.sections; in the cache key)

    @property
    def code_version(self) -> str:
        return module_closure_hash(self.fn.__module__)

    @property
    def resource_version(self) -> str:
        from importlib import resources as res

        h = hashlib.sha256()
        for rel in self.resources:
            h.update(rel.encode() + b"\0" + (res.files("finhallu") / rel).read_bytes())
        return h.hexdigest()


def _module_file(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return Path(spec.origin) if spec and spec.origin and spec.origin.endswith(".py") else None


def _finhallu_imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("finhallu")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("finhallu"):
                # `from finhallu.tasks import responses` names a submodule, not the package's contents
                subs = {f"{base}.{a.name}" for a in node.names if _safe_is_module(f"{base}.{a.name}")}
                found |= subs if subs else {base}
    return found


def _safe_is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=None)
def module_closure_hash(module: str) -> str:
    """Hash of a module's source and every finhallu module it imports, transitively.

    Prefect's TASK_SOURCE policy hashes only the task function; an edit in a helper or an
    injector would slip through it. This closure catches them.
    """
    return hashlib.sha256(repr(sorted(module_closure(module).items())).encode()).hexdigest()


def module_closure(module: str) -> dict[str, str]:
    """{module name: source sha256} for a module and the finhallu modules it reaches."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            seen[name] = ""
            continue
        src = path.read_text("utf-8")
        seen[name] = hashlib.sha256(src.encode()).hexdigest()
        todo.extend(_finhallu_imports(path, name) - seen.keys())
        if path.name == "__init__.py" and ("import_module" in src or "finhallu.registry" in src):  # plugin registries
            todo.extend(f"{name}.{p.stem}" for p in path.parent.glob("*.py") if p.stem != "__init__")
    return seen
