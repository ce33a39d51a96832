import os
from decimal import Decimal

import pytest

from finhallu.text.normalize import contains_normalized, normalize
from finhallu.text.numbers import NUMBER_RE, find_numbers, number_keys, number_keys_in
from finhallu.text.quantities import quantities, states_value, states_value_in
from finhallu.text.words import content_words, particle


@pytest.mark.parametrize(
    "a,b",
    [
        ("1억 원", "100,000,000원"),
        ("5천만원", "5,000만 원"),
        ("16.2 %", "16.2%"),
        ("1억 5천만 원", "150,000,000원"),
        ("$1.2 billion", "$1,200 million"),
        ("3조 2,000억", "3,200,000,000,000"),
        ("5천5백만 원", "55,000,000원"),
        ("1억 6천5백만 원", "1억 6,500만 원"),
        ("3백만 원", "3,000,000원"),
    ],
)
def test_equivalent_amounts_normalize_alike(a, b):
    assert normalize(a) == normalize(b)


def test_different_amounts_stay_different():
    assert normalize("5천만 원") != normalize("1억 원")
    assert not contains_normalized("한도는 5,000만 원입니다", "1억 원")
    assert contains_normalized("한도는 1인당 100,000,000원입니다.", "1억 원")


def test_find_numbers_reads_units_and_values():
    spans = find_numbers("2025년 9월 1일부터 1억 5천만 원, 금리 3.5%p")
    got = [(s.raw, s.value, s.unit) for s in spans]
    assert ("1억 5천만 원", Decimal(150000000), "원") in got
    assert ("3.5%p", Decimal("3.5"), "%p") in got
    assert number_keys("연 16.2 %") == {"16.2%"}


def test_content_words_strip_particles_and_particle_choice():
    assert content_words("예금자보호 한도는 얼마인가요?") == ["예금자보호", "한도"]
    assert particle("원금", "을/를") == "을" and particle("이자", "을/를") == "를"


def test_a_number_never_matches_inside_a_longer_number():
    assert not contains_normalized("금리는 연 15%입니다.", "5%")
    assert not contains_normalized("The rate was 2.5%.", "5%")
    assert not contains_normalized("기간은 12개월입니다", "2개월")
    assert contains_normalized("금리는 연 5%입니다.", "5%")
    assert contains_normalized("한도는 1억 원", "100,000,000원")


def test_a_number_after_a_sentence_end_still_matches():
    assert contains_normalized("보고서가 발간되었습니다. 2025년 5월에는 금리를 낮췄습니다.", "2025년 5월에는 금리를 낮췄습니다.")


def test_noun_phrases_prefetched_in_one_batch_equal_those_analysed_one_by_one(monkeypatch):
    from finhallu.text import phrases, sentences

    texts = [
        "주택도시보증공사의 전세자금보증 한도는 수도권 기준 4억 원입니다.",
        "HF 전세자금보증은 무주택 세대주만 이용할 수 있습니다.",
        "예금자보호 한도는 1인당 5천만 원이며 외화예금도 포함됩니다.",
        "신용카드 소득공제율은 15%이고 체크카드·현금영수증은 30%입니다.",
        "금융위원회는 2024년 가계부채 관리방안을 발표했다.",
    ]
    one_by_one = {t: phrases._phrases(t, sentences.tokenize_korean(t), False) for t in texts}
    assert any(one_by_one.values())
    phrases._PHRASES.clear()
    batches: list[list[str]] = []

    def many(ts):
        batches.append(list(ts))
        return sentences.tokenize_korean_many(ts)

    monkeypatch.setattr(phrases, "tokenize_korean_many", many)
    phrases.prefetch_noun_phrases(texts + texts[:2])
    assert batches == [texts]  # one batch, each text once
    monkeypatch.setattr(phrases, "tokenize_korean", lambda t: pytest.fail(f"analysed again: {t}"))
    assert {t: phrases.noun_phrases(t) for t in texts} == one_by_one


def test_clear_memos_empties_the_per_text_memos_and_keeps_loaded_resources():
    from finhallu.detectors import grounding
    from finhallu.memos import clear_memos
    from finhallu.text import phrases, sentences, words

    sample = {
        "passages": [{"text": "2023년 매출액은 1조 2,000억원으로 전년보다 증가했다."}],
        "history": [],
        "query": "2023년 매출액은 얼마인가?",
        "response": "2023년 매출액은 1조 2,000억원입니다.",
    }
    before = grounding.findings(sample)
    phrases.noun_phrases("주택도시보증공사의 보증료율")
    analyser = sentences.kiwi()
    assert grounding._FINDINGS and phrases._PHRASES and words.content_word_set.cache_info().currsize
    assert clear_memos() >= 3
    assert not grounding._FINDINGS and not phrases._PHRASES
    assert words.content_word_set.cache_info().currsize == 0 and words.strip_particle.cache_info().currsize == 0
    assert sentences.kiwi() is analyser  # a loaded resource, not a memo: kept
    assert grounding.findings(sample) == before  # recomputed, the same


def _rss_kib() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the RSS from /proc (Linux)")
def test_released_heap_pages_go_back_to_the_system():
    from finhallu.memos import release_free_heap

    # 60 MB in 4 KB objects (malloc's heap, not pymalloc's arenas and not mmap), every 64th kept: the
    # freed pages lie between live objects, where free() alone never hands them back.
    blocks = [bytes(4000) + bytes([i % 256]) for i in range(15_000)]
    kept = blocks[::64]
    before = _rss_kib()
    del blocks
    freed_only = _rss_kib()
    assert release_free_heap() is True  # glibc
    after = _rss_kib()
    assert before - freed_only < 20_000, "free() kept most pages (else this test proves nothing)"
    assert freed_only - after > 30_000, (before, freed_only, after)
    assert len(kept) == 235


def test_texts_read_apart_never_join_a_figure_across_them():
    """A turn's passages are read one by one (each memoised): a figure ending one passage and one
    opening the next stay two figures, and one passage's scale note does not scale the next."""
    a, b = "총 자산은 1억", "5천만 원의 부채가 있다"
    joined = a + "\n" + b
    assert number_keys(joined) == frozenset({"150000000원"})  # what a join reads: one figure
    assert number_keys_in([a, b]) == number_keys(a) | number_keys(b) == frozenset({"100000000", "50000000원"})
    assert contains_normalized([a, b], "1억") and contains_normalized([a, b], "부채가 있다")
    assert not contains_normalized([a, b], "1억5천만")
    assert not contains_normalized(["매출 15%", "영업이익"], "15% 영업") and contains_normalized(
        ["매출 15% 영업이익"], "15% 영업"
    )
    assert not contains_normalized(["매출 15%"], "5%")
    note, table = "(단위: 백만원)\n매출 | 1,200", "직원 수 | 1,200"
    q = quantities("1,200백만원")[0]
    assert states_value(note + "\n" + table, q)  # joined, the note scales the other passage's head count too
    assert states_value_in([note, table], q) and not states_value_in([table], q)


def test_number_pattern_skips_to_digits_without_changing_matches():
    text = "2023년 매출 1억 5천만 원, 영업이익률 16.2 %, $1.2 billion; v2.5, 12,345.6 and 3,000억"
    spans = [m.group(0) for m in NUMBER_RE.finditer(text)]
    assert spans == ["2023", "1억 5천만", "16.2", "1.2 billion", "2.5", "12,345.6", "3,000억"]


def test_released_heap_includes_arrow_pool_only_where_pyarrow_is_loaded(monkeypatch):
    """Arrow's memory pool keeps what the gates' pandas frames took: release_free_heap asks it to
    hand its unused memory back, and does not import pyarrow where nothing loaded it."""
    import sys
    import types

    from finhallu.memos import release_free_heap

    released = []
    pool = types.SimpleNamespace(release_unused=lambda: released.append(True))
    monkeypatch.setitem(sys.modules, "pyarrow", types.SimpleNamespace(default_memory_pool=lambda: pool))
    release_free_heap()
    assert released == [True]
    monkeypatch.delitem(sys.modules, "pyarrow")
    release_free_heap()
    assert released == [True] and "pyarrow" not in sys.modules


def test_morphemes_come_from_the_cache_as_kiwi_gave_them(tmp_path, monkeypatch):
    """A stage's Korean analyses are kept in the home's result cache: a later stage or build reads
    them instead of running Kiwi again, and gets exactly what Kiwi returned."""
    from finhallu.result_cache import use_morpheme_cache
    from finhallu.text import morpheme_cache, sentences

    texts = [
        "예금자보호 한도는 1인당 5천만 원입니다.",
        "HF 전세자금보증의 보증료율은 연 0.05%이다.",
        "",
        "예금자보호 한도는 1인당 5천만 원입니다.",
    ]
    fresh = [[(m.form, m.tag, m.start, m.len) for m in sentences.kiwi().tokenize(t)] for t in texts]
    with use_morpheme_cache(tmp_path) as cache:
        first = sentences.tokenize_korean_many(texts)
        assert cache is not None and cache.count() == 3  # distinct texts, each stored once
    assert [[tuple(m) for m in ms] for ms in first] == fresh

    def no_kiwi():
        raise AssertionError("Kiwi ran for a text the cache holds")

    monkeypatch.setattr(sentences, "kiwi", no_kiwi)
    with use_morpheme_cache(tmp_path):  # a later stage: a new connection to the same file
        again = sentences.tokenize_korean_many(texts)
        single = sentences.tokenize_korean(texts[1])
    assert again == first and single == first[1]
    assert [m.form for m in single][:2] == [fresh[1][0][0], fresh[1][1][0]]
    # another analyser (a new kiwipiepy or model) finds none of them
    monkeypatch.setattr(morpheme_cache, "analyser_id", lambda: "kiwipiepy-other")
    with use_morpheme_cache(tmp_path):
        assert morpheme_cache.stored(texts) == {}
    with pytest.raises(AssertionError, match="Kiwi ran"):
        with use_morpheme_cache(tmp_path):
            sentences.tokenize_korean_many(texts[:1])
