"""The stages' declared imports, made while a build waits on a remote model (flows/preload.py)."""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from finhallu.flows.preload import Preload, settle_preload, use_preload
from finhallu.llm import parallel
from finhallu.stages.pipeline import STAGES

SRC = Path(__file__).resolve().parents[1] / "src" / "finhallu"


@pytest.fixture
def probes(tmp_path, monkeypatch):
    """Makes importable modules that record the thread that imported them."""
    monkeypatch.syspath_prepend(str(tmp_path))
    made: list[str] = []

    def make(body: str = "") -> str:
        name = f"fh_probe_{uuid.uuid4().hex}"
        (tmp_path / f"{name}.py").write_text("import threading\nIMPORTED_BY = threading.current_thread().name\n" + body)
        made.append(name)
        return name

    yield make
    for name in made:
        sys.modules.pop(name, None)


def test_the_imports_wait_for_the_first_remote_request(probes):
    name = probes()
    preload = Preload([name])
    try:
        assert name not in sys.modules  # the thread waits for a request
        parallel.sending()  # what the router does before it sends one
        preload._thread.join()  # finishes on its own once started
        assert sys.modules[name].IMPORTED_BY == "finhallu-preload"
    finally:
        preload.close()


def test_settling_before_any_request_imports_on_the_thread_and_waits(probes):
    first, second = probes(), probes()
    preload = Preload([first, second, first])
    assert preload.modules == (first, second)
    preload.settle()
    assert sys.modules[first].IMPORTED_BY == sys.modules[second].IMPORTED_BY == "finhallu-preload"
    assert not preload._thread.is_alive()
    preload.close()


def test_a_module_that_fails_is_left_to_the_stage_and_the_rest_are_imported(probes):
    broken, fine = probes("raise RuntimeError('no such model file')"), probes()
    preload = Preload([broken, fine])
    preload.settle()
    assert broken not in sys.modules and "no such model file" in preload.failed[broken]
    assert fine in sys.modules
    with pytest.raises(RuntimeError, match="no such model file"):
        importlib.import_module(broken)  # the stage's own import raises it where it belongs


def test_a_build_that_ends_before_any_request_imports_nothing(probes):
    name = probes()
    with use_preload([name]) as preload:
        assert preload is not None
    assert name not in sys.modules and not preload._thread.is_alive()


def test_only_a_stage_that_declares_imports_waits_for_them(probes):
    name = probes()
    with use_preload([name]):
        settle_preload(SimpleNamespace(name="dialogues", imports=()))
        assert name not in sys.modules
        settle_preload(SimpleNamespace(name="assemble", imports=(name,)))
        assert sys.modules[name].IMPORTED_BY == "finhallu-preload"
    settle_preload(SimpleNamespace(name="assemble", imports=("no.such.module",)))  # no preload: nothing to wait for


def test_a_request_wakes_every_watcher_once():
    first, second, later = threading.Event(), threading.Event(), threading.Event()
    parallel.on_next_request(first)
    parallel.on_next_request(second)
    parallel.sending()
    parallel.on_next_request(later)
    assert first.is_set() and second.is_set() and not later.is_set()
    parallel.sending()
    assert later.is_set()


def _imported_modules() -> set[str]:
    """Every module some `import` statement of the package names (lazy ones included)."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_declared_imports_are_modules_the_code_imports():
    imported = _imported_modules()
    declared = {(stage.name, m) for stage in STAGES for m in stage.imports}
    assert {s for s, _ in declared} >= {"assemble", "detect", "metrics", "report"}
    for stage, module in declared:
        assert importlib.util.find_spec(module) is not None, f"{stage} declares {module}, which is not installed"
        # a declaration left behind by a refactoring (the code no longer imports it) is dead weight
        assert module in imported, f"{stage} declares {module}, which no import statement of finhallu names"


def test_a_provider_imports_its_sdk_and_leaves_a_missing_one_to_its_client(probes):
    from finhallu.llm.providers import get_provider
    from finhallu.llm.providers.base import RemoteProvider

    sdk = probes()
    provider = type("Probe", (RemoteProvider,), {"sdk_modules": ("fh_no_such_sdk", sdk)})()
    provider.import_sdk()  # the missing one is the client's to report, when a call makes it
    assert sys.modules[sdk].IMPORTED_BY == threading.current_thread().name
    assert get_provider("openai").sdk_modules == ("openai",) and get_provider("gemini").sdk_modules == ("google.genai",)
    for name in ("openai", "gemini"):
        for module in get_provider(name).sdk_modules:
            assert importlib.util.find_spec(module) is not None
