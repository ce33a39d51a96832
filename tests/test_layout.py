"""The layout's dependency rules (DESIGN "Layout"): lower layers never import higher ones."""

from __future__ import annotations

from pathlib import Path

import finhallu
from finhallu.tasks.base import _finhallu_imports

ROOT = Path(finhallu.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every finhallu module a file imports, at top level or lazily inside a function."""
    return _finhallu_imports(path, _module_name(path))


def _arrows(layer: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / layer).rglob("*.py")) if (ROOT / layer).is_dir() else [ROOT / f"{layer}.py"]:
        found += [(_module_name(path), imp) for imp in _imports(path)]
    return found


def _violations(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{src} imports {dst}" for src, dst in _arrows(layer)
            if any(dst == f or dst.startswith(f + ".") for f in forbidden)]


STAGE_LAYERS = ("finhallu.tasks", "finhallu.flows", "finhallu.cli")


def test_text_imports_nothing_above_it():
    allowed = ("finhallu.text", "finhallu.local_models")
    bad = [f"{s} imports {d}" for s, d in _arrows("text") if not d.startswith(allowed)]
    assert not bad, bad


def test_schemas_warehouse_llm_never_import_stages():
    for layer in ("schemas", "warehouse", "llm", "taxonomy", "registry", "local_models"):
        assert not _violations(layer, STAGE_LAYERS), (layer, _violations(layer, STAGE_LAYERS))


def test_stages_never_import_flows():
    assert not _violations("tasks", ("finhallu.flows", "finhallu.cli"))


def test_the_checker_sees_a_violation(tmp_path, monkeypatch):
    """The rules above would pass on a checker that finds nothing; make sure it finds a real arrow."""
    arrows = _arrows("flows")
    assert any(d.startswith("finhallu.tasks") for _, d in arrows)
