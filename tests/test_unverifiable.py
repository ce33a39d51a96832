"""Unverifiable material from the corpus: fabricated details mined from same-type passages with
every figure changed, opinions composed from stance, topic/aspect and evaluative predicate."""

from __future__ import annotations

import random
import re
from collections import Counter

from finhallu.injectors import TurnView, load_injectors
from finhallu.injectors.fabricate import ClaimInventory, claim_sentences
from finhallu.labelcheck.rules import RULES, Case
from finhallu.text.numbers import number_keys
from finhallu.text.quantities import quantities, states_value
from finhallu.text.sentences import split_sentences

INJ = load_injectors()

GOLD = "예금보험공사는 금융회사가 파산하면 1인당 1억 원까지 원금과 소정의 이자를 보호합니다. 외화예금도 보호 대상에 포함됩니다."
CORPUS = [
    {
        "passage_id": "a1",
        "doc_id": "d1",
        "text": "예금자보호 한도를 넘는 예금은 파산 배당을 통해 일부만 돌려받을 수 있으며, 평균 회수율은 약 45% 수준이다.",
    },
    {
        "passage_id": "a2",
        "doc_id": "d2",
        "text": "예금보험료율은 은행 0.08%, 저축은행 0.4%로 금융권마다 다르게 정해진다. 이는 위험도를 반영한 것이다.",
    },
    {"passage_id": "a3", "doc_id": "d3", "text": "| 구분 | 2024 |\n| 보호 한도 | 5,000 |"},
    {
        "passage_id": "a4",
        "doc_id": "d4",
        "text": "적금은 만기 시 이자를 한꺼번에 받습니다. 보호 대상 예금의 보험금 지급은 보통 2개월 안에 시작됩니다.",
    },
]
TENK_CORPUS = [
    {
        "passage_id": "t1",
        "doc_id": "k1",
        "text": "Net interest income increased $45 million, or 8%, to $612 million "
        "in 2024, reflecting higher loan yields. The Bank operates 64 full-service branches in California.",
    }
]


def view(
    response: str,
    lang: str = "ko",
    corpus=CORPUS,
    gold: str = GOLD,
    query: str = "예금자보호 한도는 얼마인가요?",
    answer: str = "1억 원",
    variant: str = "rules_a",
) -> TurnView:
    turn = {
        "turn_id": "dlg#t1",
        "turn_index": 1,
        "kind": "question",
        "response": response,
        "answerable": True,
        "answer": answer,
        "clue_text": split_sentences(gold)[0],
        "standalone_query": query,
        "query": query,
        "seed_id": "s1",
        "gold_passage_id": "p1",
    }
    return TurnView(
        turn=turn,
        history=[],
        lang=lang,
        evidence=[gold],
        gold_text=gold,
        other_context=[],
        sibling_seeds=[],
        hard_negatives=[],
        seed={"seed_id": "s1", "passage_id": "p1"},
        doc_id="doc",
        variant=variant,
        claims=ClaimInventory.build(corpus, lang),
    )


def added(before: str, after: str) -> str:
    return next(s for s in split_sentences(after) if s not in split_sentences(before))


def accepted(v: TurnView, new: str, label: str) -> bool:
    case = Case(
        response=new,
        paired=v.turn["response"],
        evidence=v.evidence,
        history="",
        question=v.turn["query"],
        answer=v.turn["answer"],
        clue=v.turn["clue_text"],
        lang=v.lang,
    )
    return not RULES.get(label).check(case)


def test_claims_are_prose_sentences_with_figures_in_the_answers_register():
    got = claim_sentences(CORPUS[1]["text"] + "\n" + CORPUS[2]["text"], "ko")
    assert got == [
        "예금보험료율은 은행 0.08%, 저축은행 0.4%로 금융권마다 다르게 정해집니다."
    ]  # -다 -> -ㅂ니다; table and 이는 left out


def test_fabricated_detail_is_a_corpus_claim_with_every_figure_new():
    v = view("예금자보호 한도는 1인당 1억 원입니다. 외화예금도 보호 대상에 포함됩니다.")
    seen = set()
    for seed in range(12):
        out = INJ["unverifiable"].inject(v, "fabricated_detail", random.Random(seed))
        sent = added(v.turn["response"], out.response)
        seen.add(re.sub(r"\d[\d,.]*", "N", sent))
        assert re.search(r"[가-힣]", sent) and not re.search(r"[A-Za-z]{3}", sent)  # the response's language
        assert quantities(sent) and not any(states_value(GOLD, q) for q in quantities(sent))
        assert not number_keys(sent) & number_keys(" ".join(c["text"] for c in CORPUS))  # values changed, not copied
        assert accepted(v, out.response, "fabricated_detail")
    assert len(seen) >= 2  # several donors, not one sentence


def test_english_filing_gets_an_english_filing_claim():
    gold = "Total assets were $18.4 billion at December 31, 2024."
    v = view(
        "Total assets were $18.4 billion at year end.",
        lang="en",
        corpus=TENK_CORPUS,
        gold=gold,
        query="What was the net interest income and total assets?",
        answer="$18.4 billion",
    )
    out = INJ["unverifiable"].inject(v, "fabricated_detail", random.Random(3))
    sent = added(v.turn["response"], out.response)
    assert sent.startswith(("Net interest income", "The Bank")) and not re.search(r"[가-힣]", sent)
    assert "$612 million" not in sent and "$45 million" not in sent and accepted(v, out.response, "fabricated_detail")


def test_donor_that_restates_the_evidence_is_passed_over():
    restating = [
        {
            "passage_id": "r1",
            "doc_id": "d9",
            "text": "예금보험공사는 금융회사가 파산하면 1인당 5천만 원까지 원금과 이자를 보호한다.",
        }
    ]
    v = view("예금자보호 한도는 1인당 1억 원입니다.", corpus=restating)
    assert v.donor_claims() == []  # changing its figure would contradict the evidence


def test_opinions_vary_and_pass_the_label_rule_in_both_languages():
    skeletons = Counter()
    for lang, resp, query in (
        ("ko", "예금자보호 한도는 1인당 1억 원입니다. 외화예금도 보호 대상에 포함됩니다.", "예금자보호 한도는 얼마인가요?"),
        ("en", "Net interest income was $612 million. It rose on loan yields.", "What was net interest income?"),
    ):
        for variant in ("rules_a", "rules_b"):
            for seed in range(20):
                v = view(resp, lang=lang, query=query, answer="1억 원" if lang == "ko" else "$612 million", variant=variant)
                out = INJ["unverifiable"].inject(v, "subjective_opinion", random.Random(seed))
                sent = added(resp, out.response)
                assert bool(re.search(r"[가-힣]", sent)) == (lang == "ko")
                assert accepted(v, out.response, "subjective_opinion")
                skeletons[re.sub(r"\d[\d,.]*", "N", sent)] += 1
    assert max(skeletons.values()) / sum(skeletons.values()) <= 0.10


def test_every_opinion_predicate_reads_as_an_opinion_to_both_label_checks():
    # The generator and the two checkers share no code: every predicate the composer can pick (the
    # advice-register ones included) must carry a word both of them read as a judgement.
    from finhallu.injectors import opinion
    from finhallu.injectors.verify import OPINION_MARKERS
    from finhallu.labelcheck.rules import _OPINION

    for pred in opinion._KO_GENERIC + opinion._KO_CHOICE + opinion._EN_PRED:
        assert OPINION_MARKERS.search(pred) and _OPINION.search(pred), pred


def test_fabricated_figures_move_together_so_the_sentence_keeps_its_own_relations():
    from finhallu.injectors.fabricate import perturb_figures

    listed = "초기증액형은 가입 초기 1년, 4년, 8년, 11년 중 선택한 기간에는 초기 월지급금의 70% 수준으로 줄어든 금액을 받습니다."
    ranged = "펀드는 1등급부터 6등급까지 6단계의 투자위험등급으로 분류됩니다."
    barrier = "녹인 배리어가 최초기준가격의 50%인 상품에서 기초자산 가격이 한 번이라도 50% 미만으로 떨어지면 손실이 납니다."
    for seed in range(30):
        years = [int(x) for x in re.findall(r"(\d+)년", perturb_figures(listed, set(), random.Random(seed)))]
        assert years != [1, 4, 8, 11] and years == sorted(set(years)) and len(years) == 4  # ordered, distinct
        share = int(re.search(r"(\d+)% 수준", perturb_figures(listed, set(), random.Random(seed))).group(1))
        assert share < 100  # a share stays a share
        lo, hi = map(int, re.findall(r"(\d+)등급", perturb_figures(ranged, set(), random.Random(seed))))
        assert 1 <= lo < hi
        a, b = re.findall(r"(\d+)%", perturb_figures(barrier, set(), random.Random(seed)))
        assert a == b != "50"  # equal figures stay equal


def test_a_year_moves_by_years_beside_an_amount_of_the_same_unit():
    from finhallu.injectors.fabricate import perturb_figures

    filing = (
        "Sensitivity decreased because we added $800 million of receive-fixed swaps to hedge variable-rate loans during 2024."
    )
    for seed in range(20):
        year = int(re.search(r"during (\d+)", perturb_figures(filing, set(), random.Random(seed))).group(1))
        assert 2021 <= year <= 2026 and year != 2024


def _with_passages(texts: list[str]) -> list[dict]:
    """CORPUS and one passage (its own document) per text, ids x0, x1, ..."""
    return CORPUS + [{"passage_id": f"x{i}", "doc_id": f"x{i}", "text": t} for i, t in enumerate(texts)]


def test_donors_looked_up_by_topic_words_are_the_donors_a_scan_of_every_claim_ranks():
    """The claims' word index (issue 19: turns x claims grew with the square of the corpus) ranks the
    same donors in the same order as comparing the turn with every claim."""
    from finhallu.injectors.fabricate import rank_donors

    corpus = _with_passages([f"예금보험 한도는 {i + 2}천만 원이었고 보호 대상 예금은 {i + 3}% 늘었다." for i in range(30)])
    responses = [
        "예금자보호 한도는 1인당 1억 원입니다.",
        "보호 대상 예금의 보험금은 2개월 안에 지급됩니다.",
        "적금 이자는 만기에 받습니다.",
    ]
    for response in responses:
        for query in ("예금자보호 한도는 얼마인가요?", "보험금 지급은 언제 시작되나요?"):
            v = view(response, corpus=corpus, query=query)
            inventory = ClaimInventory.build(corpus, "ko")  # its donors are cached per turn id
            scanned = rank_donors(inventory.claims, v, 5)
            assert inventory.donors(v, 5) == scanned
            assert scanned  # the probe finds donors


def test_donors_ranked_a_group_at_a_time_are_the_eager_ranking():
    """rank_donors visits one group of equal topic overlap at a time and checks held and restated
    claims lazily (issue 19: at 3,060 documents most donors come from the first groups); its donors
    are those of ranking every claim first and filtering after, history and ties included."""
    from finhallu.injectors.fabricate import _tie, _topic_words, _words, rank_donors
    from finhallu.text.normalize import normalize

    def eager(claims, v, k):
        topic = _topic_words(v)
        sources = "\n".join(normalize(t) for t in [*v.evidence, v.history_text])
        scored = [
            (-len(c.words & topic), _tie(c.text, str(v.turn.get("turn_id"))), c)
            for c in claims
            if c.words & topic and normalize(c.text) not in sources
        ]
        scored.sort(key=lambda x: x[:2])
        texts = v.evidence + [v.history_text, v.turn.get("response") or ""]
        sets = [_words(s) for t in texts for s in split_sentences(t) if _words(s)]
        restated = lambda w: bool(w) and any(len(w & s) / len(w) >= 0.6 for s in sets)  # noqa: E731
        return [c.text for _, _, c in scored if not restated(c.words)][:k]

    rng = random.Random(3)
    phrases = ["예금보험 한도는", "보호 대상 예금은", "보험금 지급은", "파산 배당은", "예금보험료율은", "외화예금 보호는"]
    corpus = _with_passages(
        [
            f"{rng.choice(phrases)} {rng.randint(2, 9)}천만 원이었고 {rng.choice(phrases)} {rng.randint(1, 40)}% 늘었다."
            for _ in range(80)
        ]
    )
    history = [
        {
            "query": "보험금 지급은 언제인가요?",
            "response": "보험금 지급은 보통 2개월 안에 시작됩니다.",
            "standalone_query": "보험금 지급 시점",
        },
        {"query": "외화예금도요?", "response": corpus[7]["text"], "standalone_query": "외화예금 보호"},
    ]
    inventory = ClaimInventory.build(corpus, "ko")
    compared = 0
    for response in ("예금자보호 한도는 1인당 1억 원입니다.", corpus[5]["text"], "보호 대상 예금은 30% 늘었습니다."):
        for hist in ([], history[:1], history):
            v = view(response, corpus=corpus)
            v.history = hist
            for k in (1, 3, 8, 200):
                expected = eager(inventory.claims, v, k)
                assert rank_donors(inventory.claims, v, k, inventory.postings()) == expected
                compared += len(expected)
    assert compared > 100  # the corpus gives donors in every case, long lists included
