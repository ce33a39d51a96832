"""Code versions: a hash of a module's source and of every finhallu module it reaches.

Prefect's TASK_SOURCE policy hashes only the task function; an edit in a helper or an injector
would slip through it. Stage and detector cache keys take these closures instead.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path


def _module_file(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return Path(spec.origin) if spec and spec.origin and spec.origin.endswith(".py") else None


def _statements(body: list[ast.stmt]):
    """Every statement of a block and of the blocks nested in it (function and class bodies, if,
    try, with, loops, match cases). Imports are statements: walking only these, not every
    expression node as ast.walk does, takes a build's ~110 modules from ~0.45 to ~0.05 s."""
    for node in body:
        yield node
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            nested = getattr(node, name, None)
            if isinstance(nested, list):
                yield from _statements(nested)


def _finhallu_imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("finhallu")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("finhallu"):
                # `from finhallu.dialogue import assistant` names a submodule, not the package's contents
                subs = {f"{base}.{a.name}" for a in node.names if _safe_is_module(f"{base}.{a.name}")}
                found |= subs if subs else {base}
    return found


def _safe_is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# Modules whose effect on a stage's outputs its cache key already covers another way, or that
# decide only how the work is run: the config models (the section's values are keyed), the LLM
# layer (what it sends is keyed: prompt versions, role settings, endpoint; not how it sends it),
# the warehouse, the registry machinery and the stage list. Editing them reruns no stage.
INFRASTRUCTURE = (
    "finhallu.config",
    "finhallu.llm",
    "finhallu.clients",
    "finhallu.warehouse",
    "finhallu.registry",
    "finhallu.progress",
    "finhallu.stages.pipeline",
)


@lru_cache(maxsize=None)
def code_hash(module: str) -> str:
    """Hash of a stage's or plug-in's module and every finhallu module it reaches, infrastructure left out."""
    return hashlib.sha256(repr(sorted(module_closure(module, INFRASTRUCTURE).items())).encode()).hexdigest()


def module_closure(module: str, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """{module name: source sha256} for a module and the finhallu modules it reaches, not entering
    those in `exclude` (names or packages)."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or any(name == x or name.startswith(x + ".") for x in exclude):
            continue
        seen[name], reached = _module_source(name)
        todo.extend(m for m in reached if m not in seen)
    return seen


@lru_cache(maxsize=None)  # a build hashes ~20 closures over the same modules; sources do not change under it
def _module_source(name: str) -> tuple[str, tuple[str, ...]]:
    """(the module's source sha256, the finhallu modules it reaches: its imports, and a plugin
    registry package's modules); ("", ()) for a module without a .py source."""
    path = _module_file(name)
    if path is None:
        return "", ()
    src = path.read_text("utf-8")
    reached = sorted(_finhallu_imports(path, name))
    if path.name == "__init__.py" and ("import_module" in src or "finhallu.registry" in src):  # plugin registries
        reached += sorted(f"{name}.{p.stem}" for p in path.parent.glob("*.py") if p.stem != "__init__")
    return hashlib.sha256(src.encode()).hexdigest(), tuple(reached)


def source_hash(*modules: str) -> str:
    """Hash of these modules' own sources, nothing they import."""
    h = hashlib.sha256()
    for name in modules:
        path = _module_file(name)
        h.update(name.encode() + b"\0" + (path.read_bytes() if path else b""))
    return h.hexdigest()
