"""Detectors on hand-made samples whose faults are known: grounding, lexical support, refusal and
answerability, embedding similarity, the LLM judge (offline rules backend through the router),
NLI (injected scorer; the model-loading error path), the learned detector, and run_detectors."""

from __future__ import annotations

import json

import jinja2
import numpy as np
import polars as pl
import pytest

from finhallu.llm.operations import OPERATIONS
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages.detect import run_detectors
from finhallu.detectors import DETECTORS, DetectorContext, get_detector
from finhallu.detectors import nli
from finhallu.local_models import ModelNotAvailableError

KO_PASSAGE = (
    "보험 계약자는 약관과 청약서 부본을 받지 못한 경우 계약이 성립한 날부터 3개월 이내에 계약을 취소할 수 있습니다. "
    "개인투자자에게 고난도금융투자상품을 판매할 때에는 2영업일 이상의 숙려기간을 보장해야 합니다."
)
EN_PASSAGE = (
    "Hanriver Bancorp reported total deposits of $15.0 billion at December 31, 2024. "
    "The loan-to-deposit ratio was 86.7% at year-end. The statements were audited by Samil."
)
OTHER = "카드 부가서비스는 카드 출시 후 3년 이상 유지해야 하며, 변경하려면 6개월 전에 알려야 합니다."


def sample(
    response: str,
    passages=(KO_PASSAGE, OTHER),
    query="약관을 받지 못했다면 언제까지 계약을 취소할 수 있나요?",
    history=(),
    lang="ko",
    **labels,
) -> dict:
    return {
        "sample_id": labels.pop("sample_id", response[:20]),
        "query": query,
        "standalone_query": query,
        "lang": lang,
        "history": [{"role": r, "content": c} for r, c in history],
        "response": response,
        "passages": [{"passage_id": f"p{i}", "text": t, "role": "retrieved"} for i, t in enumerate(passages)],
        **labels,
    }


GROUNDED = "약관과 청약서 부본을 받지 못했다면 계약이 성립한 날부터 3개월 이내에 계약을 취소할 수 있습니다."
NUMBER_ERROR = "약관과 청약서 부본을 받지 못했다면 계약이 성립한 날부터 5개월 이내에 계약을 취소할 수 있습니다."
FABRICATED = "약관을 받지 못했다면 3개월 이내에 취소할 수 있고, 수수료 12만 원을 내야 합니다."
REFUSAL = "제공된 자료에서는 관련 내용을 찾을 수 없어 답변드리기 어렵습니다."
CTX = DetectorContext(seed=1)


def detect(name: str, s: dict, **params):
    det = get_detector(name)
    return det.run([s], det.params(params), CTX)[0]


def test_every_detector_is_registered_with_its_parameters():
    for name in (
        "numeric_grounding",
        "lexical_support",
        "embedding_similarity",
        "refusal_answerability",
        "llm_judge",
        "nli",
        "learned",
    ):
        get_detector(name)
    assert {
        "numeric_grounding",
        "lexical_support",
        "embedding_similarity",
        "refusal_answerability",
        "llm_judge",
        "nli",
        "learned",
    } <= set(DETECTORS.names())
    with pytest.raises(ValueError, match="no parameter"):
        get_detector("numeric_grounding").params({"nope": 1})
    with pytest.raises(KeyError, match="unknown detector"):
        get_detector("no_such_detector")


def test_numeric_grounding_tells_contradiction_fabrication_and_grounded_answers():
    ok = detect("numeric_grounding", sample(GROUNDED))
    assert ok.pred_binary == "faithful" and ok.pred_4class == "faithful_answer" and ok.score < 0.5
    bad = detect("numeric_grounding", sample(NUMBER_ERROR))
    assert (bad.pred_binary, bad.pred_type) == ("hallucinated", "contradictory")
    assert "5개월" in bad.rationale and "3개월" in bad.rationale and bad.score > ok.score
    fab = detect("numeric_grounding", sample(FABRICATED))
    assert (fab.pred_binary, fab.pred_type) == ("hallucinated", "unverifiable") and "12만" in fab.rationale
    # names and periods too (English)
    en_q = "What were Hanriver Bancorp's total deposits at the end of 2024?"
    assert (
        detect(
            "numeric_grounding", sample("Total deposits were $15.0 billion at December 31, 2024.", (EN_PASSAGE,), en_q, lang="en")
        ).pred_binary
        == "faithful"
    )
    ent = detect(
        "numeric_grounding",
        sample("Total deposits were $15.0 billion, as audited by Deloitte Anjin.", (EN_PASSAGE,), en_q, lang="en"),
    )
    assert ent.pred_type == "unverifiable" and "Deloitte Anjin" in ent.rationale
    per = detect(
        "numeric_grounding", sample("Total deposits were $15.0 billion in the first quarter.", (EN_PASSAGE,), en_q, lang="en")
    )
    assert per.pred_binary == "hallucinated" and "first quarter" in per.rationale


def test_history_is_evidence_unless_disabled():
    s = sample(
        "네, 말씀드린 대로 약관 취소 수수료는 12만 원입니다.",
        query="약관 취소 수수료가 얼마라고 하셨죠?",
        history=[("user", "약관 취소에 수수료가 있나요?"), ("assistant", "약관 취소 수수료는 12만 원입니다.")],
    )
    assert detect("numeric_grounding", s).pred_binary == "faithful"
    no_history = detect("numeric_grounding", s, use_history=False)
    assert no_history.pred_binary == "hallucinated" and "12만" in no_history.rationale


def test_refusals_and_answerability_give_the_four_classes():
    covered, uncovered = (KO_PASSAGE, OTHER), (OTHER,)
    for name in ("numeric_grounding", "lexical_support", "refusal_answerability", "embedding_similarity"):
        assert detect(name, sample(REFUSAL, covered)).pred_4class == "false_refusal", name
        assert detect(name, sample(REFUSAL, uncovered)).pred_4class == "true_refusal", name
    ra = get_detector("refusal_answerability")
    assert detect("refusal_answerability", sample(GROUNDED, covered)).pred_4class == "faithful_answer"
    fa = detect("refusal_answerability", sample(GROUNDED, uncovered))
    assert (fa.pred_4class, fa.pred_type) == ("hallucination", "false_acceptance")
    assert ra.defaults["coverage_threshold"] == 0.5


def test_lexical_support_sees_modifier_flips_and_irrelevant_answers():
    flip = detect(
        "lexical_support",
        sample(
            "고난도금융투자상품을 판매할 때에는 2영업일 미만의 숙려기간을 보장해야 합니다.",
            query="고난도금융투자상품의 숙려기간은 며칠인가요?",
        ),
    )
    assert (flip.pred_type, flip.pred_binary) == ("contradictory", "hallucinated") and "미만" in flip.rationale
    off = detect("lexical_support", sample(OTHER, query="고난도금융투자상품의 숙려기간은 며칠인가요?"))
    assert off.pred_type == "irrelevance"
    assert detect("lexical_support", sample(GROUNDED)).pred_binary == "faithful"


def test_embedding_similarity_scores_unrelated_responses_higher():
    grounded = detect("embedding_similarity", sample(GROUNDED))
    unrelated = detect("embedding_similarity", sample("해외 주식 양도소득세는 연 250만 원 기본공제 후 22% 세율로 과세됩니다."))
    assert unrelated.score > grounded.score
    assert "min" in grounded.rationale and "median" in grounded.rationale and "max" in grounded.rationale
    mins = detect("embedding_similarity", sample(GROUNDED), aggregate="min")
    assert mins.score >= grounded.score  # min of the per-line cosines <= their max
    with pytest.raises(ValueError, match="aggregate"):
        detect("embedding_similarity", sample(GROUNDED), aggregate="mode")


def test_embedding_similarity_encodes_only_texts_its_home_has_not_seen(tmp_path, monkeypatch):
    from finhallu.embedders.cache import CACHE_FILE
    from finhallu.embedders.hashing import HashingEmbedder

    encoded: list[str] = []
    real = HashingEmbedder.encode
    monkeypatch.setattr(HashingEmbedder, "encode", lambda self, texts: encoded.extend(texts) or real(self, texts))
    det = get_detector("embedding_similarity")
    first = [sample(GROUNDED), sample("해외 주식 양도소득세는 연 250만 원 기본공제 후 22% 세율로 과세됩니다.")]
    home = DetectorContext(seed=1, cache_dir=tmp_path)
    plain = det.run(first, det.params({}), DetectorContext(seed=1))
    assert det.run(first, det.params({}), home) == plain and len(encoded) >= 2 * 3
    encoded.clear()
    assert det.run(first, det.params({}), home) == plain and encoded == []  # every vector from the cache
    added = sample("예금자보호 한도는 1인당 5천만 원입니다.")
    assert det.run([*first, added], det.params({}), home)[:2] == plain
    assert encoded == [added["response"]]  # the new response alone: its context lines are known
    assert CACHE_FILE in {p.name for p in tmp_path.iterdir()}


def test_llm_judge_through_the_offline_router_in_every_mode():
    ctx = DetectorContext(roles={"detector_judge": {"provider": "offline", "model": "rules", "temperature": 0.0}})
    det = get_detector("llm_judge")
    s_bad, s_ok, s_ref = sample(NUMBER_ERROR), sample(GROUNDED), sample(REFUSAL)
    for mode in ("binary", "4class", "multiclass"):
        bad, ok, ref = det.run([s_bad, s_ok, s_ref], det.params({"mode": mode}), ctx)
        assert bad.pred_binary == "hallucinated" and ok.pred_binary == "faithful", mode
        assert ref.pred_4class == "false_refusal", mode
        assert bad.score > ok.score
        assert all(step in bad.rationale for step in ("1)", "2)", "3)")), bad.rationale
    typed = det.run([s_bad], det.params({"mode": "multiclass"}), ctx)[0]
    assert typed.pred_type == "contradictory" and "5개월" in typed.rationale
    en = det.run(
        [sample("Deposits were $18.5 billion.", (EN_PASSAGE,), "What were total deposits?", lang="en")], det.params({}), ctx
    )[0]
    assert en.pred_binary == "hallucinated" and en.rationale.startswith("1) Answerability")
    cfg = det.config(det.params({"mode": "4class"}), ctx)
    assert cfg["operation"] == "detect_4class" and cfg["backend"] == "offline:rules" and len(cfg["prompt_version"]) == 16
    with pytest.raises(ValueError, match="mode"):
        det.run([s_ok], det.params({"mode": "ternary"}), ctx)


@pytest.mark.parametrize("op", ["detect_hallucination", "detect_4class", "detect_type"])
def test_judge_prompts_render_in_both_languages_and_ask_for_the_output_fields(op):
    get_detector("llm_judge")
    operation = OPERATIONS[op]
    fields = set(operation.output.model_fields)
    for lang in ("ko", "en"):
        text = (
            jinja2.Environment(undefined=jinja2.StrictUndefined)
            .from_string(operation.template(lang))
            .render(passages=[KO_PASSAGE], history=[{"role": "user", "content": "q"}], query="질문", response="응답", lang=lang)
        )
        assert KO_PASSAGE in text and "응답" in text
        assert all(f'"{f}"' in text for f in fields), (lang, fields)


def _word_overlap_scorer(pairs):
    """A stand-in NLI model: entailment = share of hypothesis words in the premise; a different number
    in the same wording is a contradiction."""
    out = []
    for premise, hyp in pairs:
        hw, pw = set(hyp.split()), set(premise.split())
        share = len(hw & pw) / max(1, len(hw))
        contra = 0.8 if ("5개월" in hyp and "3개월" in premise) else 0.05
        ent = share * (1 - contra)
        out.append([ent, max(0.0, 1 - ent - contra), contra])
    return np.array(out)


def test_nli_scoring_logic_with_an_injected_scorer():
    params = get_detector("nli").params({})
    ok, bad, fab, ref = nli.score_samples(
        [sample(GROUNDED), sample(NUMBER_ERROR), sample("전혀 관련 없는 해외 송금 한도 이야기입니다."), sample(REFUSAL)],
        _word_overlap_scorer,
        params,
    )
    assert ok.pred_binary == "faithful" and ok.score < 0.5
    assert (bad.pred_binary, bad.pred_type) == ("hallucinated", "contradictory")
    assert (fab.pred_binary, fab.pred_type) == ("hallucinated", "unverifiable")
    assert ref.pred_4class == "false_refusal"
    assert "entailment per sentence" in ok.rationale


def test_nli_without_a_local_model_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.delenv(nli.ENV, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    nli._load.cache_clear()
    det = get_detector("nli")
    with pytest.raises(ModelNotAvailableError, match="cross-encoder/nli-deberta-v3-xsmall") as err:
        det.run([sample(GROUNDED)], det.params({}), CTX)
    assert nli.ENV in str(err.value) and "never downloads" in str(err.value)
    monkeypatch.setenv(nli.ENV, str(tmp_path / "nowhere"))
    nli._load.cache_clear()
    with pytest.raises(ModelNotAvailableError, match="does not hold config.json"):
        det.run([sample(GROUNDED)], det.params({}), CTX)
    with pytest.raises(ModelNotAvailableError, match="entailment"):
        nli._label_columns({0: "positive", 1: "negative", 2: "neutral"})
    assert nli._label_columns({0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"}) == [1, 2, 0]


def _labelled_set(n_pairs: int = 30) -> list[dict]:
    """Pairs of grounded / number-changed answers over varied passages, split 60/20/20."""
    rows = []
    for i in range(n_pairs):
        days, alt = 10 + i, 40 + i
        passage = f"상품 {i}호의 청약 철회 기간은 계약일부터 {days}일이며, 위반 시 과태료 {i + 2}천만 원이 부과됩니다."
        q = f"상품 {i}호의 청약 철회 기간은 며칠인가요?"
        split = "train" if i < 0.6 * n_pairs else ("valid" if i < 0.8 * n_pairs else "test")
        for hallu, resp in (
            (False, f"상품 {i}호의 청약 철회 기간은 계약일부터 {days}일입니다."),
            (True, f"상품 {i}호의 청약 철회 기간은 계약일부터 {alt}일입니다."),
        ):
            rows.append(
                sample(
                    resp,
                    (passage, OTHER),
                    q,
                    sample_id=f"s{i}-{int(hallu)}",
                    split=split,
                    label_binary="hallucinated" if hallu else "faithful",
                    label_4class="hallucination" if hallu else "faithful_answer",
                    hallu_type="contradictory" if hallu else None,
                )
            )
    return rows


def test_learned_fits_on_train_only_and_beats_chance_on_test():
    rows = _labelled_set()
    det = get_detector("learned")
    out = det.run(rows, det.params({}), DetectorContext(seed=3))
    assert all(d is None for r, d in zip(rows, out) if r["split"] == "train")
    scored = [(r, d) for r, d in zip(rows, out) if r["split"] == "test"]
    acc = np.mean([(d.pred_binary == r["label_binary"]) for r, d in scored])
    assert acc >= 0.8, acc
    assert all(d.pred_type == "contradictory" for r, d in scored if d.pred_binary == "hallucinated")
    again = det.run(rows, det.params({}), DetectorContext(seed=3))
    assert [d and d.score for d in again] == [d and d.score for d in out]
    gb = det.run(rows, det.params({"model": "gbdt"}), DetectorContext(seed=3))
    assert np.mean([(d.pred_binary == r["label_binary"]) for r, d in zip(rows, gb) if r["split"] == "test"]) >= 0.8
    with pytest.raises(ValueError, match="train"):
        det.run([dict(r, split="test") for r in rows], det.params({}), DetectorContext())


class _InOrder:
    """A ThreadPoolExecutor stand-in that runs each call at once, in the caller's thread."""

    def __init__(self, max_workers=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, items):
        return [fn(i) for i in items]

    def submit(self, fn, *args):
        from concurrent.futures import Future

        done: Future = Future()
        done.set_result(fn(*args))
        return done


@pytest.mark.parametrize("model", ["auto", "gbdt", "logreg"])
def test_learned_fits_on_threads_give_the_models_of_fits_in_order(monkeypatch, model):
    """The binary, 4-class and type models are fit on threads; the detections equal those of the
    same fits made one after another (scores, labels and the rationale naming the kept model)."""
    import finhallu.detectors.learned as learned

    rows = _labelled_set()
    for i, r in enumerate(rows):  # 4 classes and 2 types among the hallucinated train rows
        if r["label_binary"] == "hallucinated" and i % 4 == 1:
            r.update(label_4class="false_refusal", hallu_type="false_refusal")
    det = get_detector("learned")
    threaded = det.run(rows, det.params({"model": model}), DetectorContext(seed=3))
    monkeypatch.setattr(learned, "ThreadPoolExecutor", _InOrder)
    in_order = det.run(rows, det.params({"model": model}), DetectorContext(seed=3))
    assert [d and (d.score, d.pred_binary, d.pred_4class, d.pred_type, d.rationale) for d in threaded] == [
        d and (d.score, d.pred_binary, d.pred_4class, d.pred_type, d.rationale) for d in in_order
    ]
    assert {d.pred_4class for d in threaded if d} >= {"faithful_answer"}


def test_run_detectors_records_version_and_config_and_is_deterministic():
    rows = _labelled_set(12)
    for r in rows:
        r.update(
            pair_id=r["sample_id"][:-2],
            dialogue_id="d",
            source="aihub",
            institution="x",
            turn_index=1,
            answerable=True,
            hallu_subtype=None,
            injector=None,
        )
    samples = pl.DataFrame(rows, infer_schema_length=None)
    dets = {
        "numeric_grounding": {},
        "lexical_support:top1": {"max_passages": 1},
        "refusal_answerability": {},
        "llm_judge": {"mode": "binary"},
        "learned": {},
    }
    a = run_detectors(samples, dets, "t@1", DetectorContext(seed=5))
    b = run_detectors(samples, dets, "t@1", DetectorContext(seed=5))
    assert a.equals(b)
    CONTRACTS["detections"].conform(a)
    assert set(a["detector"]) == set(dets)
    assert a["score"].is_between(0, 1).all()
    cfg = {d: json.loads(c) for d, c in a.select("detector", "detector_config").unique().iter_rows()}
    assert (
        cfg["lexical_support:top1"]["params"]["max_passages"] == 1
        and cfg["lexical_support:top1"]["detector"] == "lexical_support"
    )
    assert cfg["llm_judge"]["backend"] == "offline:rules"
    versions = dict(a.select("detector", "detector_version").unique().iter_rows())
    assert versions["numeric_grounding"].startswith("v6-") and versions["learned"].startswith("v2-")
    assert a.filter(pl.col("detector") == "learned").height == sum(r["split"] != "train" for r in rows)
    with pytest.raises(ValueError, match="no parameter"):
        run_detectors(samples, {"numeric_grounding": {"treshold": 1}}, "t@1")


def test_nli_loads_a_local_cross_encoder_and_maps_its_labels(tmp_path, monkeypatch):
    """The real loading path on a tiny randomly initialized cross-encoder written here (no NLI model
    ships offline): label columns come from the model's id2label, probabilities sum to one."""
    torch = pytest.importorskip("torch")
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789$.")
    (tmp_path / "vocab.txt").write_text("\n".join(vocab))
    BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=3,
        id2label={0: "contradiction", 1: "entailment", 2: "neutral"},
        label2id={"contradiction": 0, "entailment": 1, "neutral": 2},
    )
    BertForSequenceClassification(cfg).save_pretrained(tmp_path)
    monkeypatch.setenv(nli.ENV, str(tmp_path))
    nli._load.cache_clear()
    params = get_detector("nli").params({"model": "ignored-when-the-env-names-a-folder"})
    scorer, model_id = nli.load_scorer(params)
    assert model_id.endswith("@fp-" + model_id.rsplit("@fp-", 1)[1]) and len(model_id.rsplit("@fp-", 1)[1]) == 12
    pairs = [(EN_PASSAGE, "Deposits were $15.0 billion."), (EN_PASSAGE, "Deposits were $18.5 billion.")]
    probs = scorer(pairs)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)
    model, cols, _ = nli._load(params["model"], "cpu")
    logits = np.asarray(model.predict(pairs, apply_softmax=False, show_progress_bar=False))
    raw = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probs, raw[:, [1, 2, 0]], rtol=1e-5)
    out = get_detector("nli").run([sample("Deposits were $15.0 billion.", (EN_PASSAGE,), "Deposits?", lang="en")], params, CTX)
    assert 0.0 <= out[0].score <= 1.0 and out[0].pred_binary in ("faithful", "hallucinated")
    nli._load.cache_clear()


def test_numeric_grounding_reads_table_scales_through_the_shared_quantities():
    """The same unit/scale module as hard negatives and the label verifier: a figure restated from a
    table at another scale is grounded; a changed figure is not."""
    table = "(단위 : 백만원)\n| 구 분 | 제54기 |\n| 자본총계 | 4,150,000 |"
    ok = get_detector("numeric_grounding").run(
        [sample("자본총계는 4조 1,500억 원입니다.", (table,), "자본총계는?")], get_detector("numeric_grounding").params({}), CTX
    )[0]
    bad = get_detector("numeric_grounding").run(
        [sample("자본총계는 5조 1,500억 원입니다.", (table,), "자본총계는?")], get_detector("numeric_grounding").params({}), CTX
    )[0]
    assert ok.pred_binary == "faithful" and bad.pred_binary == "hallucinated" and bad.score > ok.score


TABLE_10K = (
    "Consolidated balance sheet data\nTotal current assets | 1,469,502 | 1,201,334\n"
    "Total current liabilities | 2,213,556 | 1,980,112\nNet revenue | 5,620 | 5,000"
)
ANALYST_Q = (
    "Looking at the most recent balance sheet and considering the company's short-term obligations, "
    "working capital position and the liquidity risk discussed by management, what is the current ratio?"
)


def test_an_answer_that_rescales_and_computes_figures_is_grounded_and_a_wrong_computation_is_not():
    # the table's "(in thousands)" note was cut off; the analyst writes the amounts out and divides them
    right = "Current assets were $1,469,502,000 against current liabilities of $2,213,556,000, a current ratio of 0.66."
    wrong = "Current assets were $1,469,502,000 against current liabilities of $2,213,556,000, a current ratio of 0.76."
    ok = detect("numeric_grounding", sample(right, passages=(TABLE_10K,), query=ANALYST_Q, lang="en"))
    assert ok.pred_binary == "faithful", ok.rationale
    assert "ratio of 1,469,502 and 2,213,556" in ok.rationale and "at another scale" not in ok.rationale.split("computed:")[0]
    bad = detect("numeric_grounding", sample(wrong, passages=(TABLE_10K,), query=ANALYST_Q, lang="en"))
    assert bad.pred_binary == "hallucinated" and "0.76" in bad.rationale
    q = "How did net revenue develop?"
    grew = detect(
        "numeric_grounding", sample("Net revenue grew 12.4% to $5,620 million.", passages=(TABLE_10K,), query=q, lang="en")
    )
    assert grew.pred_binary == "faithful", grew.rationale
    # a one-digit percentage is stated too coarsely to be taken for a computation (chance would match it)
    coarse = detect(
        "numeric_grounding", sample("Net revenue grew 7% to $5,620 million.", passages=(TABLE_10K,), query=q, lang="en")
    )
    assert coarse.pred_binary == "hallucinated"
    # the same digits under another scale word are a changed figure, not a restatement
    scaled = detect(
        "numeric_grounding",
        sample("Revenue was $1,250 billion.", passages=("Revenue was $1,250 million.",), query="What was revenue?", lang="en"),
    )
    assert scaled.pred_binary == "hallucinated"


def test_a_long_question_the_passages_answer_is_no_false_acceptance_but_an_unbacked_answer_is():
    from finhallu.detectors.grounding import findings

    answered = "The current ratio is the total current assets of 1,469,502 over total current liabilities of 2,213,556."
    f = findings(sample(answered, passages=(TABLE_10K,), query=ANALYST_Q, lang="en"))
    assert f.coverage < 0.5 and f.answer_coverage >= 0.75  # the question is mostly preamble; the answer is all there
    unbacked = "Management expects the ratio to recover above 1.2 once the bond refinancing closes next spring."
    g = findings(sample(unbacked, passages=(TABLE_10K,), query=ANALYST_Q, lang="en"))
    assert g.answer_coverage < 0.5
    for name in ("lexical_support", "numeric_grounding"):
        kept = detect(name, sample(answered, passages=(TABLE_10K,), query=ANALYST_Q, lang="en"))
        assert kept.pred_binary == "faithful", (name, kept.rationale)
        flagged = detect(name, sample(unbacked, passages=(TABLE_10K,), query=ANALYST_Q, lang="en"))
        assert flagged.pred_binary == "hallucinated", name


def test_one_unbacked_clause_of_a_long_sentence_is_a_claim_of_its_own():
    from finhallu.detectors.grounding import claims, sentence_support

    text = (
        "Hanriver Bancorp reported total deposits of $15.0 billion at December 31, 2024, and the bank plans to "
        "open forty new branches across three provinces next year."
    )
    assert len(claims(text)) == 2
    support = sentence_support(text, [EN_PASSAGE])
    assert support[0][1] > 0.8 and support[1][1] < 0.3
    assert claims("Deposits rose, and loans fell.") == ["Deposits rose, and loans fell."]  # too short to split


# ---- period alignment of figures ------------------------------------------------------------------
TABLE_WITH_YEARS = (
    "Net sales (in millions)\n| | 2024 | 2023 |\n|---|---|---|\n| Net sales | 391,035 | 383,285 |\n"
    "| Operating income | 123,216 | 114,301 |"
)


@pytest.mark.parametrize(
    "response, evidence, misplaced",
    [
        ("Net sales were $383,285 million in fiscal 2024.", TABLE_WITH_YEARS, ["383,285 million"]),  # last year's column
        ("Net sales were $391,035 million in fiscal 2024.", TABLE_WITH_YEARS, []),
        ("Net sales were $383,285 million.", TABLE_WITH_YEARS, []),  # no year named: nothing to misplace
        (
            "Revenue was $5,100 million in fiscal 2023.",
            "In fiscal 2023 revenue was $5,620 million. In fiscal 2022 it was $5,100 million.",
            ["5,100 million"],
        ),
        ("2023년 매출액은 5,620억 원입니다.", "2023년 매출액은 5,620억 원으로 전년(2022년) 5,100억 원보다 늘었다.", []),
        # one sentence naming both years cannot place a figure: no finding either way
        ("2022년 매출액은 5,620억 원입니다.", "2023년 매출액은 5,620억 원으로 전년(2022년) 5,100억 원보다 늘었다.", []),
        ("The margin was 31.5 % in 2024.", "The margin was 31.5 % in 2023.", []),  # a rate may well repeat
        ("Revenue was $7,000 million in 2024.", "Revenue was $7,000 million.", []),  # the evidence names no year
    ],
)
def test_a_figure_stated_for_another_year_is_misplaced(response, evidence, misplaced):
    from finhallu.detectors.periods import misplaced_figures

    assert [m.raw for m in misplaced_figures(response, [evidence])] == misplaced


def test_numeric_grounding_calls_last_years_figure_a_contradiction():
    det = get_detector("numeric_grounding")
    sample = {
        "query": "What were net sales in fiscal 2024?",
        "history": [],
        "passages": [{"passage_id": "p", "text": TABLE_WITH_YEARS}],
    }
    wrong = det.fn({**sample, "response": "Net sales were $383,285 million in fiscal 2024."}, det.params({}), DetectorContext())
    right = det.fn({**sample, "response": "Net sales were $391,035 million in fiscal 2024."}, det.params({}), DetectorContext())
    assert wrong.pred_binary == "hallucinated" and wrong.pred_type == "contradictory" and "2023" in wrong.rationale
    assert right.pred_binary == "faithful", right.rationale


# ---- metric attribution, parts of a sentence, bare answers ---------------------------------------
RESULTS = (
    "For fiscal 2024, Cedar Trust earned $466 million in net income, up from $395 million in fiscal 2023; "
    "the bank is based in Austin. Its net interest margin was 3.32% and its return on equity 10.4%, while "
    "the efficiency ratio stood at 52.6%. Total deposits were $56.0 billion at the end of 2024."
)
RATE_TABLE = "단계 | 시행일 | 적용 범위 | 스트레스 금리 적용비율\n1단계 | 2024년 2월 26일 | 은행권 주택담보대출 | 25%\n2단계 | 2024년 9월 1일 | 은행권 주담대 | 50%"


@pytest.mark.parametrize(
    "response, question, misattributed",
    [
        ("Its return on equity was 52.6% in 2024.", "", ["52.6%"]),  # the efficiency ratio's figure
        ("52.6%", "What was Cedar Trust's return on equity for 2024?", ["52.6%"]),  # bare: the question's metric
        ("3.32%", "How wide was the net interest margin at Cedar Trust in 2024?", []),
        ("Its return on equity was 10.4% in 2024.", "", []),
        ("Net income came to $0.47 billion for fiscal 2024.", "", []),  # rescaled; its label follows it
        # a long sentence without breaks says too much to be a label: no finding either way
        (
            "In its annual report the bank said that return on equity, which management tracks closely against "
            "peers and its own cost of capital over the whole cycle of rates and credit, was 52.6% this time.",
            "",
            [],
        ),
        ("1단계의 스트레스 금리 적용비율은 25%입니다.", "", []),  # a bare pipe table: row and column label it
        ("1단계의 스트레스 금리 적용비율은 50%입니다.", "", []),  # (2단계's: the labels share the column, no verdict)
    ],
)
def test_a_figure_given_for_another_metric_is_misattributed(response, question, misattributed):
    from finhallu.detectors.attribution import misattributed_figures

    evidence = [RATE_TABLE if "단계" in response else RESULTS]
    assert [m.raw for m in misattributed_figures(response, evidence, question)] == misattributed


def test_figures_are_placed_by_their_part_of_the_sentence_and_bare_answers_by_the_question():
    from finhallu.detectors.periods import misplaced_figures

    q = "What was Cedar Trust's net income in fiscal 2024?"
    assert [m.raw for m in misplaced_figures("Net income was $395 million in fiscal 2024.", [RESULTS])] == ["395 million"]
    assert [m.raw for m in misplaced_figures("$395 million", [RESULTS], q)] == ["395 million"]
    assert misplaced_figures("$466 million", [RESULTS], q) == []
    assert misplaced_figures("$395 million", [RESULTS]) == []  # no question, no year: nothing to misplace


def test_numeric_grounding_reads_short_answers_against_their_question():
    det = get_detector("numeric_grounding")
    sample = {"history": [], "passages": [{"passage_id": "p", "text": RESULTS}]}

    def verdict(question: str, response: str):
        return det.fn({**sample, "query": question, "response": response}, det.params({}), DetectorContext())

    roe = "What was Cedar Trust's return on equity for 2024?"
    wrong = verdict(roe, "52.6%")
    assert wrong.pred_type == "contradictory" and "10.4%" in wrong.rationale, wrong.rationale
    assert verdict(roe, "10.4%").pred_binary == "faithful"
    income = "What was Cedar Trust's net income in fiscal 2024?"
    # computed from the figures the question is about; a backward period where the evidence has two years
    assert verdict("By how much did Cedar Trust's net income grow in fiscal 2024?", "About 18.0%.").pred_binary == "faithful"
    assert verdict(income, "$466 million, more than in the previous year.").pred_binary == "faithful"
    assert verdict(income, "$395 million").pred_type == "contradictory"
    # a bare name is a name: the auditor the evidence does not hold
    audit = {"history": [], "passages": [{"passage_id": "p", "text": "The 2024 statements were audited by Crowe."}]}
    named = det.fn(
        {**audit, "query": "Who audited the 2024 statements?", "response": "Samil."}, det.params({}), DetectorContext()
    )
    assert named.pred_binary == "hallucinated" and "Samil" in named.rationale
    kept = det.fn({**audit, "query": "Who audited the 2024 statements?", "response": "Crowe."}, det.params({}), DetectorContext())
    assert kept.pred_binary == "faithful", kept.rationale
    one_year = {"history": [], "passages": [{"passage_id": "p", "text": "Net income was $466 million in 2024."}]}
    lone = det.fn(
        {**one_year, "query": income, "response": "$466 million, more than in the previous year."},
        det.params({}),
        DetectorContext(),
    )
    assert lone.pred_binary == "hallucinated"  # no earlier year in the evidence to compare with


def test_a_remote_detector_runs_while_the_offline_ones_compute_and_its_run_is_shared():
    """A detector declared remote runs on its own thread from the start: here it finishes only once
    the offline detector has started (in sequence, it would wait out its timeout and fail), and a
    detector reading it as a feature gets that run's detections, not a second run."""
    import threading

    import polars as pl
    from test_extending import restored

    from finhallu.detectors import Detection, register_detector
    from finhallu.stages.detect import run_detectors

    offline_started, remote_runs = threading.Event(), []
    with restored(DETECTORS):

        @register_detector("waits_on_a_model", remote=lambda params, ctx: True, batch=True)
        def remote(samples, params, ctx):
            remote_runs.append(threading.current_thread().name)
            assert offline_started.wait(timeout=60), "the offline detector never started while the remote one ran"
            return [Detection(0.9, "hallucinated", "hallucination", None, "model") for _ in samples]

        @register_detector("computes_here", batch=True)
        def offline(samples, params, ctx):
            offline_started.set()
            reads = ctx.detections("waits_on_a_model", samples)  # a feature: waits for the remote run
            return [Detection(1 - d.score, "faithful", "faithful_answer", None, "rules") for d in reads]

        samples = pl.DataFrame([{"sample_id": "s1", "response": "a"}, {"sample_id": "s2", "response": "b"}])
        found = run_detectors(samples, {"waits_on_a_model": {}, "computes_here": {}}, "e1", DetectorContext(seed=0))
    assert len(remote_runs) == 1 and remote_runs[0].startswith("remote-detector")
    scores = dict(zip(found["detector"] + "/" + found["sample_id"], found["score"]))
    assert scores == pytest.approx(
        {"waits_on_a_model/s1": 0.9, "waits_on_a_model/s2": 0.9, "computes_here/s1": 0.1, "computes_here/s2": 0.1}
    )


def test_grounding_findings_of_an_earlier_build_are_read_not_recomputed(tmp_path, monkeypatch):
    """Per-item caching inside the detect stage (issue 19): findings are kept by their sample's
    content and the grounding code's version; a rebuild computes only the new samples'."""
    from finhallu.detectors import grounding
    from finhallu.fanout import InProcess
    from finhallu.result_cache import ResultCache, cached_map

    class Counting(InProcess):
        computed: list = []

        def map(self, fn, items, name="", min_items=None):
            type(self).computed += list(items)
            return super().map(fn, items, name, min_items)

    first = [sample(GROUNDED), sample(NUMBER_ERROR), sample(FABRICATED)]
    fresh = [grounding._findings(*grounding._findings_key(s, True, None)) for s in first]
    grounding.clear_memo()
    assert grounding.prefetch_findings([(s, True, None) for s in first], Counting(), tmp_path) == 0
    assert len(Counting.computed) == 3
    grounding.clear_memo()  # the next build's process
    Counting.computed = []
    later = first + [sample(REFUSAL)]
    assert grounding.prefetch_findings([(s, True, None) for s in later], Counting(), tmp_path) == 3
    assert [k[0] for k in Counting.computed] == [REFUSAL]  # only the new sample computed
    assert [grounding.findings(s) for s in first] == fresh  # read back as computed
    assert grounding.findings(first[1]).missing_numbers or grounding.findings(first[1]).contradicted
    grounding.clear_memo()
    # other code (another version of the grounding modules) reuses nothing
    other = ResultCache(tmp_path / "results.sqlite", "findings", "another-version")
    assert other.get([]) == {} and other.count() == 0
    results, reused = cached_map(lambda part: [len(p) for p in part], ["a", "bb"], other)
    assert (results, reused) == ([1, 2], 0)
    assert cached_map(lambda part: [0 for _ in part], ["bb", "a", "ccc"], other) == ([2, 1, 0], 2)


def test_a_damaged_cache_file_costs_time_not_the_build(tmp_path, caplog):
    """A result cache file SQLite cannot open is left alone (a warning naming it): the findings
    and the morphemes are made without it and are the same."""
    from finhallu.detectors import grounding
    from finhallu.fanout import InProcess
    from finhallu.result_cache import use_morpheme_cache
    from finhallu.text import sentences

    (tmp_path / "results.sqlite").write_bytes(b"not a database, " * 512)
    s = sample(NUMBER_ERROR)
    grounding.clear_memo()
    expected = grounding._findings(*grounding._findings_key(s, True, None))
    with caplog.at_level("WARNING", logger="finhallu.cache"):
        assert grounding.prefetch_findings([(s, True, None)], InProcess(), tmp_path) == 0
        with use_morpheme_cache(tmp_path) as cache:
            morphs = sentences.tokenize_korean("예금자보호 한도는 5천만 원입니다.")
    assert grounding.findings(s) == expected and cache is None and morphs
    assert caplog.text.count("results.sqlite: not used") == 2  # the findings' and the morphemes' turn
    grounding.clear_memo()
