"""The README's "Layout and extending": a detector, an injector subtype, a source kind and an LLM
provider are each one registration, and the rest of the pipeline (config validation, the gate's
allowed values, the judge, the exports, the key check) picks it up with no other change.

Each test registers its plug-in from here (as a module of the plug-in's package would) and puts the
registry back afterwards."""

from __future__ import annotations

import contextlib
import copy
import json
import random

import polars as pl
import pytest

from finhallu.config import load_config


@contextlib.contextmanager
def restored(*registries):
    for r in registries:
        r.load()  # the package's own plug-ins first, as in a build
    saved = [(r, copy.copy(r._items), copy.copy(r._origins), copy.copy(r._order)) for r in registries]
    try:
        yield
    finally:
        for r, items, origins, order in saved:
            r._items, r._origins, r._order = items, origins, order


def test_a_detector_is_one_registration(tmp_path):
    from finhallu.detectors import DETECTORS, Detection, DetectorContext, labels_from_binary, register_detector
    from finhallu.stages.detect import run_detectors

    with restored(DETECTORS):

        @register_detector("longest_answer_flagged", version="1", max_chars=40)
        def detect(sample: dict, params: dict, ctx) -> Detection:
            long = len(sample["response"]) > params["max_chars"]
            binary, four, kind = labels_from_binary(long, False)
            return Detection(float(long), binary, four, kind, f"{len(sample['response'])} characters")

        cfg = load_config("demo", {"detect": {"detectors": {"longest_answer_flagged": {"max_chars": 10}}}})
        assert cfg.detect.detectors["longest_answer_flagged"] == {"max_chars": 10}
        samples = pl.DataFrame([{"sample_id": "s1", "response": "a long enough answer"}, {"sample_id": "s2", "response": "ok"}])
        mine = {"longest_answer_flagged": cfg.detect.detectors["longest_answer_flagged"]}
        found = run_detectors(samples, mine, "e1", DetectorContext(seed=0))
        assert found.sort("sample_id")["pred_binary"].to_list() == ["hallucinated", "faithful"]
    with pytest.raises(ValueError, match="unknown detector 'longest_answer_flagged'"):
        load_config("demo", {"detect": {"detectors": {"longest_answer_flagged": {}}}})


def test_a_source_kind_is_one_registration(tmp_path):
    from finhallu.sources import LOADERS, Block, LoadedDoc, register_source
    from finhallu.stages import ingest

    with restored(LOADERS):

        @register_source("notes", patterns=("*.txt",), test_institutions=("Held-out Bank",))
        def load(path):
            bank, _, text = path.read_text("utf-8").partition("\n")
            yield LoadedDoc(
                path.stem, "aihub", bank, "en", path.stem, "note", None, str(path), [Block("b0", "body", "text", text)]
            )

        (tmp_path / "n1.txt").write_text("Held-out Bank\nThe deposit rate is 3.1 % a year.", encoding="utf-8")
        (tmp_path / "n2.txt").write_text("Other Bank\nThe loan rate is 5.2 % a year.", encoding="utf-8")
        cfg = load_config("demo", {"ingest": {"sources": [{"kind": "notes", "paths": [str(tmp_path)]}]}})
        assert cfg.ingest.sources[0].test_institutions == ["Held-out Bank"]  # the kind's own default
        docs = ingest.run({}, ingest.STAGE.context(cfg))["documents"]
        assert dict(zip(docs["doc_id"], docs["split"])) == {"n1": "test", "n2": "train"}


def test_an_llm_provider_is_one_registration(monkeypatch):
    from finhallu.llm.errors import MissingKeyError
    from finhallu.llm.keys import resolve_key_source
    from finhallu.llm.providers import PROVIDERS, register_provider
    from finhallu.llm.providers.openai import OpenAIProvider

    with restored(PROVIDERS):

        @register_provider("acme")
        class AcmeProvider(OpenAIProvider):  # an OpenAI-wire endpoint with a key of its own
            name = "acme"
            key_envs = ("ACME_API_KEY",)

        cfg = load_config("demo", {"roles": {"dialogue_judge": {"provider": "acme", "model": "acme-1"}}})
        role = cfg.roles["dialogue_judge"].model_dump()
        monkeypatch.delenv("ACME_API_KEY", raising=False)
        with pytest.raises(MissingKeyError, match="ACME_API_KEY"):
            resolve_key_source("dialogue_judge", role)
        monkeypatch.setenv("ACME_API_KEY", "acme-key-123")
        assert resolve_key_source("dialogue_judge", role) == ("acme-key-123", "ACME_API_KEY")


def test_an_injector_subtype_is_one_registration_plus_its_independent_check():
    from finhallu.export import rationale
    from finhallu.injectors import INJECTORS, LEAVES, Injected, hallu_subtypes, register_leaf
    from finhallu.injectors.verify import Proposal, verify_label
    from finhallu.labelcheck import verify_sample
    from finhallu.labelcheck.rules import RULES, acceptance
    from finhallu.schemas.contracts import CONTRACTS
    from finhallu.schemas.gate import run_gate
    from finhallu.stages.inject import InjectConfig

    def accept(p: Proposal) -> tuple[bool, str]:
        return "2023" in p.new and "2023" not in p.evidence_text, "a year the evidence does not give"

    with restored(LEAVES, INJECTORS, RULES):

        @register_leaf(
            "contradictory",
            "year_error",
            accept=accept,
            minimal_edit=True,
            names={"en": "Year Error", "ko": "연도 오류"},
            rationale={
                "en": "2) Claims: the response says '{new}' where the passage says '{old}'.",
                "ko": "2) 주장: 응답의 '{new}'는 문서의 '{old}'와 다릅니다.",
            },
            instruction={"en": "change the year", "ko": "연도를 바꾸기"},
        )
        def make(view, rng: random.Random) -> Injected | None:
            return Injected("year_error", view.turn["response"].replace("2024", "2023"), "2024 -> 2023")

        @acceptance("year_error", "a year the evidence does not give, where the pair states the evidence's year")
        def check(case) -> list[str]:  # the verifier's own reading: no code shared with the injector
            return [] if "2023" in case.response and "2023" not in case.context else ["no new year"]

        assert "year_error" in hallu_subtypes() and "year_error" in INJECTORS.get("contradictory").subtypes
        InjectConfig(types=["contradictory"])  # the type still validates; its new leaf is drawn like the others
        inj = {
            "original_response": "The rate rose in 2024.",
            "injected_response": "The rate rose in 2023.",
            "hallu_type": "contradictory",
            "hallu_subtype": "year_error",
        }
        turn = {"answerable": True, "clue_text": "rose in 2024", "answer": "2024"}
        assert verify_label(inj, turn, ["The rate rose in 2024."], "") == (True, "a year the evidence does not give")
        verdict = verify_sample(
            label="year_error",
            rule="",
            response=inj["injected_response"],
            paired=inj["original_response"],
            evidence=["The rate rose in 2024."],
            history="",
            question="When?",
            answer="2024",
            clue="rose in 2024",
            lang="en",
        )
        assert verdict.ok, verdict.reasons
        row = {
            "injection_id": "i1",
            "dialogue_id": "d1",
            "turn_id": "t1",
            "turn_index": 1,
            "split": "train",
            "injector": "rules_a",
            "hallu_type": "contradictory",
            "hallu_subtype": "year_error",
            "original_response": inj["original_response"],
            "injected_response": inj["injected_response"],
            "injected_context": [{"passage_id": "p1", "role": "gold"}],
            "counterpart_response": inj["original_response"],
            "counterpart_label": "faithful_answer",
            "edit": "2024 -> 2023",
            "strategy": "rules",
            "edit_chars": 1,
            "edit_words": 1,
        }
        assert run_gate("injections", CONTRACTS["injections"].conform(pl.DataFrame([row])), {}).ok  # an allowed value
        sample = {
            "lang": "en",
            "passages": [{"passage_id": "p1", "text": "The rate rose in 2024.", "role": "gold"}],
            "hallu_type": "contradictory",
            "hallu_subtype": "year_error",
            "label_4class": "hallucination",
            "answerable": True,
            "response": inj["injected_response"],
        }
        text = rationale(sample, inj["original_response"])
        assert "the response says '2023.' where the passage says '2024.'" in text and "Year Error" in text
    assert "year_error" not in hallu_subtypes()
    assert json.dumps(sorted(RULES.names()))  # restored
