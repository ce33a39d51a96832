"""inject (balance, sources), assemble (pairs, Table-2 statistics) and export (HF layout, SFT rationales)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from finhallu.stages.assemble import AssembleConfig
from finhallu.stages.dialogue_qc import DialogueQCConfig
from finhallu.stages.inject import InjectConfig
from finhallu.stages.injection_qc import InjectionQCConfig
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages import assemble
from finhallu.stages import inject as injection
from finhallu.stages import dialogue_qc, injection_qc
from finhallu.stages.base import StageContext
from finhallu.export import export_files, rationale
from finhallu.injectors.verify import edit_distance
from finhallu.warehouse.store import TableRef
from test_dialogues import FILLER, PA, PB, _frames, _run

REFUSAL = "제공된 자료에서는 예금 이자율 상한에 관한 내용을 찾을 수 없어 정확한 답변을 드리기 어렵습니다."


# ---- assemble on hand-made injections ----------------------------------------------------------
def _ctx(stage: str, cfg) -> StageContext:
    return StageContext(stage=stage, config=cfg, seed=3)


def _inputs() -> dict[str, pl.DataFrame]:
    passages = pl.DataFrame(
        [
            {"passage_id": "pA", "text": PA, "split": "train"},
            {"passage_id": "pB", "text": PB, "split": "test"},
            {
                "passage_id": "pE",
                "text": "Net income was $412 million in 2024. Total assets were $45.3 billion.",
                "split": "test",
            },
        ]
        + [{"passage_id": f"pF{i}", "text": t, "split": "test"} for i, t in enumerate(FILLER)]
    )
    ctx = lambda *ids, role="retrieved": [{"passage_id": p, "role": role} for p in ids]  # noqa: E731
    turn = lambda did, n, q, resp, answerable, context, gold=None, clue=None, answer=None: {  # noqa: E731
        "turn_id": f"{did}#t{n}",
        "dialogue_id": did,
        "turn_index": n,
        "seed_id": "s",
        "kind": "question",
        "reconfirms_turn": None,
        "standalone_query": q,
        "query": q,
        "response": resp,
        "answerable": answerable,
        "gold_passage_id": gold,
        "clue_text": clue,
        "answer": answer,
        "context": context,
        "origin": "seed",
    }
    turns = pl.DataFrame(
        [
            turn("d1", 1, "외화예금도 보호되나요?", "네, 외화예금도 보호 대상에 포함됩니다.", True, ctx("pA", role="gold"), "pA"),
            turn(
                "d1",
                2,
                "그럼 한도는 1인당 얼마인가요?",
                "예금보험공사는 금융회사가 파산하면 1인당 1억 원까지 예금을 보호합니다.",
                True,
                [{"passage_id": "pB", "role": "retrieved"}, {"passage_id": "pA", "role": "gold"}],
                "pA",
                PA.split(". ")[0],
                "1억 원",
            ),
            turn(
                "d2",
                1,
                "예금 이자율 상한은 몇 %인가요?",
                REFUSAL,
                False,
                ctx("pF0", "pF1", "pF2", role="hard_negative"),
                None,
                None,
                "3%",
            ),
            turn(
                "d2",
                2,
                "체크카드 수수료율은요?",
                "영세가맹점의 체크카드 수수료율은 0.15%입니다.",
                True,
                ctx("pB", role="gold"),
                "pB",
            ),
            turn(
                "d3",
                1,
                "What was net income in 2024?",
                "Net income was $412 million in 2024.",
                True,
                ctx("pE", role="gold"),
                "pE",
            ),
        ]
    )
    dialogues = pl.DataFrame(
        [
            {
                "dialogue_id": "d1",
                "doc_id": "A",
                "source": "aihub",
                "institution": "예금보험공사",
                "lang": "ko",
                "split": "train",
                "n_turns": 2,
            },
            {
                "dialogue_id": "d2",
                "doc_id": "B",
                "source": "aihub",
                "institution": "금융감독원",
                "lang": "ko",
                "split": "test",
                "n_turns": 2,
            },
            {
                "dialogue_id": "d3",
                "doc_id": "E",
                "source": "sec10k",
                "institution": "Hanriver",
                "lang": "en",
                "split": "test",
                "n_turns": 1,
            },
        ]
    ).with_columns(seed_ids=pl.lit(["s"]), has_reconfirm=pl.lit(False))
    inj = lambda iid, did, n, htype, sub, new, injector="rules_a", context=None, cp=None, cpl="faithful_answer": {  # noqa: E731
        "injection_id": iid,
        "dialogue_id": did,
        "turn_id": f"{did}#t{n}",
        "turn_index": n,
        "split": dialogues.filter(pl.col("dialogue_id") == did)["split"][0],
        "injector": injector,
        "hallu_type": htype,
        "hallu_subtype": sub,
        "original_response": turns.filter(pl.col("turn_id") == f"{did}#t{n}")["response"][0],
        "injected_response": new,
        "edit": "",
        "strategy": "rules",
        "injected_context": context or turns.filter(pl.col("turn_id") == f"{did}#t{n}")["context"][0],
        "counterpart_response": cp or turns.filter(pl.col("turn_id") == f"{did}#t{n}")["response"][0],
        "counterpart_label": cpl,
    }
    rows = [
        inj(
            "i1",
            "d1",
            2,
            "contradictory",
            "number_error",
            "예금보험공사는 금융회사가 파산하면 1인당 3억 원까지 예금을 보호합니다.",
        ),
        inj("i2", "d2", 1, "false_acceptance", None, "예금 이자율 상한은 3%입니다.", "rules_b", cpl="true_refusal"),
        inj(
            "i3",
            "d3",
            1,
            "false_refusal",
            None,
            "The provided documents do not contain information about net income, so I cannot answer that.",
            "rules_a",
        ),
        inj(
            "i4",
            "d2",
            2,
            "unverifiable",
            "subjective_opinion",
            "영세가맹점의 체크카드 수수료율은 0.15%입니다. 솔직히 추천할 만합니다.",
        ),
    ]
    injections = pl.DataFrame(
        [
            {
                **r,
                "edit_chars": edit_distance(r["original_response"], r["injected_response"])[0],
                "edit_words": edit_distance(r["original_response"], r["injected_response"])[1],
            }
            for r in rows
        ]
    )
    return {
        "dialogues": dialogues,
        "turns": turns,
        "injections": injections,
        "passages": passages,
        "injection_qc": pl.DataFrame(
            {
                "injection_id": ["i1", "i2", "i3", "i4"],
                "passed": [True, True, True, False],
                "reasons": [[], [], [], ["naturalness 1 < 2"]],
                "verified": [True, True, True, False],
                "verify_reasons": [[], [], [], ["hallucinated: number_error: no figure replaced"]],
            }
        ),
        "dialogue_qc": pl.DataFrame(
            {
                "dialogue_id": ["d1", "d2", "d3", "d4"],
                "passed": [True, True, True, False],
                "reasons": [[], [], [], ["coherency 1 < 2: turn 3 jumps"]],
                **{c: [1.0, 1.0, 1.0, 1.0] for c in dialogue_qc.CRITERIA},
            }
        ),
        "retrievals": pl.DataFrame({"seed_id": ["s"], "rank": [1], "is_gold": [True]}),
        "hard_negatives": pl.DataFrame(
            {"clue_absent": [True], "answer_absent": [True], "unanswerable": [True], "is_hard_negative": [True]}
        ),
        "qa_seeds": pl.DataFrame({"answerable": [True]}),
        "documents": pl.DataFrame(
            {
                "doc_id": ["A", "B", "E", "V"],
                "source": ["aihub", "aihub", "sec10k", "dart"],
                "split": ["train", "test", "test", "valid"],
            }
        ),
    }


@pytest.fixture(scope="module")
def assembled():
    inputs = _inputs()
    return inputs, assemble.run(inputs, _ctx("assemble", AssembleConfig()))


def test_each_kept_injection_becomes_a_faithful_hallucinated_pair(assembled):
    inputs, out = assembled
    s = CONTRACTS["samples"].conform(out["samples"])
    assert s.height == 6 and set(s["pair_id"]) == {"i1", "i2", "i3"}  # i4 failed its QC
    for pid, pair in s.group_by("pair_id"):
        assert sorted(pair["label_binary"]) == ["faithful", "hallucinated"]
        assert pair["query"].n_unique() == 1 and pair["history"].n_unique() == 1 and pair["passages"].n_unique() == 1
    i1 = s.filter(pl.col("pair_id") == "i1").sort("label_binary")
    assert i1["label_4class"].to_list() == ["faithful_answer", "hallucination"]
    assert i1["history"][0].to_list() == [
        {"role": "user", "content": "외화예금도 보호되나요?"},
        {"role": "assistant", "content": "네, 외화예금도 보호 대상에 포함됩니다."},
    ]


def test_false_acceptance_pairs_with_a_true_refusal_and_false_refusal_keeps_the_passages(assembled):
    _, out = assembled
    s = out["samples"]
    fa = s.filter(pl.col("pair_id") == "i2").sort("label_binary")
    assert fa["label_4class"].to_list() == ["true_refusal", "hallucination"] and not fa["answerable"].any()
    assert fa["response"][0] == REFUSAL
    assert all(p["role"] == "hard_negative" for p in fa["passages"][0])
    fr = s.filter(pl.col("pair_id") == "i3").sort("label_binary")
    assert fr["label_4class"].to_list() == ["faithful_answer", "false_refusal"] and fr["answerable"].all()
    assert [p["passage_id"] for p in fr["passages"][1]] == ["pE"] and fr["passages"][1][0]["role"] == "gold"


def test_dataset_stats_mirror_table_2(assembled):
    _, out = assembled
    st = CONTRACTS["dataset_stats"].conform(out["dataset_stats"])
    get = lambda split, metric, slice_="all": st.filter(
        (pl.col("split") == split)
        & (pl.col("metric") == metric)  # noqa: E731
        & (pl.col("slice") == slice_)
    )["value"].item()
    assert get("test", "dialogues") == 2 and get("train", "dialogues") == 1
    assert get("test", "unique_passages") == 4  # pF0-2 (d2) and pE (d3)
    assert (get("test", "turns_min"), get("test", "turns_max"), get("test", "turns_mean")) == (1, 1, 1)
    assert (get("train", "turns_min"), get("train", "dialogue_turns_max")) == (2, 2)
    assert get("test", "pct_unanswerable") == 50.0 and get("train", "pct_unanswerable") == 0.0
    assert get("test", "mean_query_words") == pytest.approx((5 * 2 + 6 * 2) / 4)  # 5- and 6-word questions, twice each
    assert get("train", "mean_query_morphemes", "ko") > get("train", "mean_query_words")  # morphemes outnumber words
    assert get("test", "samples_by_hallu_type", "false_acceptance") == 1
    assert get("test", "samples_by_injector", "rules_b") == 2
    assert get("all", "mean_edit_words", "number_error") == 1 and get("all", "mean_edit_chars", "number_error") == 1
    assert get("all", "dialogue_retention") == 0.75 and get("all", "dialogue_qc_dropped_by", "coherency") == 1
    assert get("all", "injection_retention") == 0.75 and get("all", "injection_qc_dropped_by", "naturalness") == 1
    assert get("all", "label_verified_share") == 0.75
    dropped = st.filter(pl.col("metric") == "label_dropped_by")
    assert dropped.height == 1 and dropped["slice"][0].endswith("| hallucinated: number_error") and dropped["value"][0] == 1
    assert get("test", "coverage_samples", "sec10k") == 2 and get("valid", "coverage_documents", "dart") == 1
    from finhallu.coverage import warnings_from_stats

    assert warnings_from_stats(st.to_dicts()) == [
        "split valid has no samples (its documents gave none)",
        "source dart has documents but no samples",
    ]


# ---- export ----------------------------------------------------------------------------------
def _export(home: Path, samples: pl.DataFrame) -> Path:
    src = home / "src"
    src.mkdir(parents=True)
    samples.write_parquet(src / "part-0.parquet")
    return export_files(home, TableRef("samples", 4, "h", str(src)))


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_export_is_a_hugging_face_layout_and_rerun_byte_identical(assembled, tmp_path):
    _, out = assembled
    samples = CONTRACTS["samples"].conform(out["samples"])
    root = _export(tmp_path / "h1", samples)
    card = (root / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    default = next(c for c in meta["configs"] if c["config_name"] == "default")
    assert {f["split"] for f in default["data_files"]} == {"train", "test"}
    labels_cfg = next(c for c in meta["configs"] if c["config_name"] == "labels")
    for f, lab in zip(default["data_files"], labels_cfg["data_files"]):
        files = list(root.glob(f["path"]))
        assert len(files) == 1 and lab["split"] == f["split"]
        back = pl.read_parquet(files[0])
        # Detector inputs only: no label, no `answerable`, no pair or dialogue, no passage role.
        assert set(back.columns) == {
            "sample_id",
            "split",
            "source",
            "institution",
            "lang",
            "turn_index",
            "history",
            "query",
            "passages",
            "response",
        }
        assert all(set(p) == {"passage_id", "text"} for ps in back["passages"].to_list() for p in ps)
        labels = pl.read_parquet(next(root.glob(lab["path"])))
        assert "passage_id" not in labels.columns and {"label_binary", "answerable", "passage_roles", "pair_id"} <= set(
            labels.columns
        )
        whole = samples.filter(pl.col("split") == f["split"]).sort("sample_id")
        joined = back.join(labels, on="sample_id")
        assert joined["sample_id"].to_list() == whole["sample_id"].to_list()
        assert joined["label_binary"].to_list() == whole["label_binary"].to_list()
        assert joined["passage_roles"].to_list() == [[p["role"] for p in ps] for ps in whole["passages"].to_list()]
        lines = (root / "jsonl" / f"{f['split']}.jsonl").read_text().splitlines()
        assert [json.loads(x)["sample_id"] for x in lines] == back["sample_id"].to_list()
        assert all("label_binary" not in json.loads(x) and "answerable" not in json.loads(x) for x in lines)
        label_lines = (root / "jsonl" / f"{f['split']}.labels.jsonl").read_text().splitlines()
        assert [json.loads(x)["label_binary"] for x in label_lines] == whole["label_binary"].to_list()
    assert {c["config_name"] for c in meta["configs"]} == {"default", "labels", "sft"}
    assert _tree_digest(root) == _tree_digest(_export(tmp_path / "h2", samples))


def test_export_written_a_few_rows_at_a_time_is_the_same_bytes(assembled, tmp_path, monkeypatch):
    """The JSON lines go out a slice at a time (bounded memory at paper scale): slices of 1 or 2
    rows, each split cut into several, give the files one slice per split gives."""
    import finhallu.export as export

    _, out = assembled
    samples = CONTRACTS["samples"].conform(out["samples"])
    whole = _tree_digest(_export(tmp_path / "h1", samples))
    assert samples.group_by("split").len()["len"].max() > 2  # so slices of 2 do cut a split
    for rows in (1, 2):
        monkeypatch.setattr(export, "EXPORT_SLICE_ROWS", rows)
        assert _tree_digest(_export(tmp_path / f"s{rows}", samples)) == whole


def test_sft_records_carry_rationales_in_the_samples_language(assembled, tmp_path):
    _, out = assembled
    root = _export(tmp_path / "h", CONTRACTS["samples"].conform(out["samples"]))
    recs = {
        json.loads(x)["sample_id"]: json.loads(x)
        for split in ("train", "test")
        for x in (root / "sft" / f"{split}.jsonl").read_text().splitlines()
    }
    samples = out["samples"]
    number = samples.filter((pl.col("pair_id") == "i1") & (pl.col("label_binary") == "hallucinated")).row(0, named=True)
    answer = recs[number["sample_id"]]["messages"][-1]["content"]
    assert "1) 답변 가능성" in answer and "'3억'" in answer and "'1억'" in answer and "수치 오류" in answer
    labels = json.loads(answer.splitlines()[-1])
    assert labels == {
        "label_binary": "hallucinated",
        "label_4class": "hallucination",
        "hallu_type": "contradictory",
        "hallu_subtype": "number_error",
    }
    fr = samples.filter((pl.col("pair_id") == "i3") & (pl.col("label_binary") == "hallucinated")).row(0, named=True)
    text = recs[fr["sample_id"]]["messages"][-1]["content"]
    assert text.startswith("1) Answerability: passage [1]") and "refuses although passage [1]" in text and "False Refusal" in text
    tr = samples.filter((pl.col("pair_id") == "i2") & (pl.col("label_binary") == "faithful")).row(0, named=True)
    assert "근거가 없습니다" in rationale(tr, None) and "faithful (true_refusal)" in rationale(tr, None)


# ---- inject: sources, balance, one injection per base dialogue ------------------------------------
@pytest.fixture(scope="module")
def injected():
    frames = _frames()
    test_split = lambda df: df.with_columns(
        split=pl.when(pl.col("doc_id").is_in(["A", "F"]))
        .then(pl.lit("test"))  # noqa: E731
        .otherwise(pl.col("split"))
    )
    frames["documents"] = test_split(frames["documents"])
    frames["qa_seeds"] = test_split(frames["qa_seeds"])
    frames["passages"] = test_split(
        frames["passages"].with_columns(split=pl.lit("train"), lang=pl.lit("ko"), source=pl.lit("aihub"))
    )
    negs = [
        {"seed_id": s, "passage_id": p, "candidate_rank": i + 1, "is_hard_negative": True, "judge": "rules"}
        for s in ("s1", "s2", "s3")
        for i, p in enumerate(["pF0", "pF1", "pF2"])
    ]
    frames["hard_negatives"] = pl.concat([frames["hard_negatives"], pl.DataFrame(negs)])
    out = _run(frames, dialogues_per_document=6)
    inputs = {**frames, **out}
    inputs["dialogue_qc"] = dialogue_qc.run(inputs, _ctx("dialogue_qc", DialogueQCConfig()))["dialogue_qc"]
    inj = injection.run(inputs, _ctx("inject", InjectConfig()))["injections"]
    return inputs, inj


def test_each_base_dialogue_gets_one_injection_and_the_test_split_two_sources(injected):
    inputs, inj = injected
    passed = inputs["dialogue_qc"].filter(pl.col("passed"))["dialogue_id"]
    assert inj["dialogue_id"].is_unique().all() and set(inj["dialogue_id"]) <= set(passed)
    test = inj.filter(pl.col("split") == "test")
    counts = dict(test.group_by("injector").len().iter_rows())
    assert set(counts) == {"rules_a", "rules_b"} and abs(counts["rules_a"] - counts["rules_b"]) <= 1
    assert CONTRACTS["injections"].conform(inj).height == inj.height


def test_types_are_balanced_across_the_split(injected):
    _, inj = injected
    test = inj.filter(pl.col("split") == "test")
    per_type = dict(test.group_by("hallu_type").len().iter_rows())
    n = test.height
    assert len(per_type) == min(5, n) and max(per_type.values()) - min(per_type.values()) <= 1, per_type


def test_injections_pass_their_independent_label_check(injected):
    inputs, inj = injected
    qc = injection_qc.run({**inputs, "injections": inj}, _ctx("injection_qc", InjectionQCConfig()))["injection_qc"]
    assert qc["passed"].all(), qc.filter(~pl.col("passed"))["reasons"].to_list()
    minimal = inj.filter(pl.col("hallu_type") == "contradictory")
    assert (minimal["edit_words"] <= 2).all()


def test_copied_share_is_the_longest_common_run_difflib_finds():
    """copied_share searches substrings instead of running difflib; difflib (no junk) is the reference."""
    import random
    from difflib import SequenceMatcher

    from finhallu.stages.assemble.validity import copied_share

    rng = random.Random(3)
    cases = [("", "abc"), ("abc", ""), ("abc", "xxabcxx"), ("매출액은 4억 원", "당기 매출액은 4억 원이다"), ("aaaa", "aa")]
    cases += [
        (
            "".join(rng.choice("ab 가나") for _ in range(rng.randint(1, 15))),
            "".join(rng.choice("abc 가나다") for _ in range(rng.randint(0, 60))),
        )
        for _ in range(2000)
    ]
    for sentence, context in cases:
        m = SequenceMatcher(None, sentence, context, autojunk=False).find_longest_match(0, len(sentence), 0, len(context))
        assert copied_share(sentence, context) == (m.size / len(sentence) if sentence else 1.0), (sentence, context)
