"""Curated lexicons for rule-based injection (and for classifying edits when verifying labels).

MODIFIERS flip a claim's direction or bound; TERMS are pairs a confused reader swaps.
Longer entries first so that "불가능" is seen before "가능".
"""

from __future__ import annotations

_KO_MODIFIER_PAIRS = [
    ("불가능", "가능"),
    ("이상", "미만"),
    ("이하", "초과"),
    ("증가", "감소"),
    ("상승", "하락"),
    ("인상", "인하"),
    ("확대", "축소"),
    ("포함", "제외"),
    ("최대", "최소"),
    ("높은", "낮은"),
    ("높아", "낮아"),
    ("늘어", "줄어"),
    ("완화", "강화"),
    ("허용", "금지"),
    ("의무", "선택"),
    ("우대", "가산"),
    ("면제", "부과"),
    ("있습니다", "없습니다"),
]
_EN_MODIFIER_PAIRS = [
    ("increased", "decreased"),
    ("increase", "decrease"),
    ("higher", "lower"),
    ("more than", "less than"),
    ("above", "below"),
    ("at least", "at most"),
    ("gains", "losses"),
    ("rose", "fell"),
    ("grew", "declined"),
    ("improved", "deteriorated"),
    ("including", "excluding"),
]
_KO_TERM_PAIRS = [
    ("예금자보호 한도", "보장 대상"),
    ("전세보증금", "월세보증금"),
    ("전세", "월세"),
    ("원리금", "원금"),
    ("원금", "이자"),
    ("영업이익", "당기순이익"),
    ("고정금리", "변동금리"),
    ("신용카드", "체크카드"),
    ("해지환급금", "만기환급금"),
    ("중도상환수수료", "연체이자"),
    ("기준금리", "시장금리"),
    ("적금", "예금"),
    ("보험료", "보험금"),
    ("소득공제", "세액공제"),
    ("주택담보대출", "신용대출"),
    ("LTV", "DTI"),
    ("DSR", "DTI"),
    ("청약철회", "계약해지"),
    ("연회비", "수수료"),
    ("매출액", "영업이익"),
    ("자산", "부채"),
    ("현금서비스", "카드론"),
    ("가맹점", "카드회원"),
    ("보증료", "보증금"),
    ("비과세", "분리과세"),
]
_EN_TERM_PAIRS = [
    ("net interest income", "noninterest income"),
    ("net income", "operating income"),
    ("revenue", "net income"),
    ("total assets", "total liabilities"),
    ("deposits", "loans"),
    ("Tier 1", "Total capital"),
    ("principal", "interest"),
    ("fixed-rate", "variable-rate"),
    ("gross margin", "operating margin"),
    ("provision for credit losses", "net charge-offs"),
    ("common stock", "preferred stock"),
]


def _both_ways(pairs):
    out = []
    for a, b in pairs:
        out += [(a, b), (b, a)]
    return sorted(out, key=lambda p: -len(p[0]))


MODIFIERS = {"ko": _both_ways(_KO_MODIFIER_PAIRS), "en": _both_ways(_EN_MODIFIER_PAIRS)}
TERMS = {"ko": _both_ways(_KO_TERM_PAIRS), "en": _both_ways(_EN_TERM_PAIRS)}
MODIFIER_SET = {(a, b) for lang in MODIFIERS.values() for a, b in lang}
TERM_SET = {(a, b) for lang in TERMS.values() for a, b in lang}
