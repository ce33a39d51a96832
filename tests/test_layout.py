"""The layout's dependency rules (DESIGN "Layout"): lower layers never import higher ones."""

from __future__ import annotations

from pathlib import Path

import finhallu
from finhallu.codeversion import _finhallu_imports

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
    return [f"{src} imports {dst}" for src, dst in _arrows(layer) if any(dst == f or dst.startswith(f + ".") for f in forbidden)]


STAGE_LAYERS = ("finhallu.stages", "finhallu.flows", "finhallu.service", "finhallu.cli")


def test_text_imports_nothing_above_it():
    allowed = ("finhallu.text", "finhallu.local_models")
    bad = [f"{s} imports {d}" for s, d in _arrows("text") if not d.startswith(allowed)]
    assert not bad, bad


def test_schemas_warehouse_llm_never_import_stages():
    for layer in ("schemas", "warehouse", "llm", "taxonomy", "registry", "local_models"):
        assert not _violations(layer, STAGE_LAYERS), (layer, _violations(layer, STAGE_LAYERS))


def test_stages_never_import_flows():
    assert not _violations("stages", ("finhallu.flows", "finhallu.service", "finhallu.cli"))


def test_the_checker_sees_a_violation(tmp_path, monkeypatch):
    """The rules above would pass on a checker that finds nothing; make sure it finds a real arrow."""
    arrows = _arrows("flows")
    assert any(d.startswith("finhallu.stages") for _, d in arrows)


def test_plugins_never_import_stages_flows_or_cli():
    """Plug-ins and the shared libraries sit below the stages: a stage may use them, never the reverse."""
    for layer in (
        "sources",
        "embedders",
        "injectors",
        "detectors",
        "external",
        "dialogue",
        "probe",
        "labelcheck",
        "answerability",
        "text",
        "taxonomy",
        "codeversion",
    ):
        assert not _violations(layer, STAGE_LAYERS), (layer, _violations(layer, STAGE_LAYERS))


def test_editing_a_stage_module_reruns_only_that_stage_and_its_descendants():
    """Each stage's code version covers its own modules and what they import, infrastructure left out:
    a stage's module may sit in the closure of that stage and its descendants only."""
    from finhallu.codeversion import INFRASTRUCTURE, module_closure
    from finhallu.stages.pipeline import ALL_STAGES as STAGES

    def descendants(name: str) -> set[str]:
        produced, out = set(), set()
        for s in STAGES[[x.name for x in STAGES].index(name) :]:
            if s.name == name or produced & set(s.inputs):
                out.add(s.name)
                produced |= set(s.outputs)
        return out

    def own_modules(stage) -> set[str]:
        mod = stage.run.__module__
        path = Path(finhallu.__file__).parent.parent / (mod.replace(".", "/"))
        if path.is_dir():  # a stage package owns all its modules
            return {_module_name(p) for p in path.rglob("*.py")}
        return {mod}

    closures = {s.name: set(module_closure(s.run.__module__, INFRASTRUCTURE)) for s in STAGES}
    for stage in STAGES:
        allowed = descendants(stage.name)
        for other, closure in closures.items():
            if own_modules(stage) & closure:
                assert other in allowed, f"{other} imports {stage.name}'s modules: an edit there would rerun it"
    assert closures["report"] and not any(m.startswith(INFRASTRUCTURE) for c in closures.values() for m in c)


def test_infrastructure_edits_rerun_no_stage():
    """The config models, the LLM layer and the warehouse change how a stage runs, not what it makes."""
    from finhallu.codeversion import INFRASTRUCTURE, module_closure
    from finhallu.stages.pipeline import ALL_STAGES

    for s in ALL_STAGES:
        closure = module_closure(s.run.__module__, INFRASTRUCTURE)
        assert not [
            m
            for m in closure
            if m
            in (
                "finhallu.config",
                "finhallu.llm.router",
                "finhallu.llm.runtime",
                "finhallu.warehouse.store",
                "finhallu.stages.pipeline",
            )
        ], s.name


def test_no_function_is_longer_than_80_lines():
    import ast

    long = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{_module_name(path)}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long, long
