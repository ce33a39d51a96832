"""Curated lexicons for rule-based injection (and for classifying edits when verifying labels).

MODIFIERS flip a claim's direction or bound; TERMS are pairs a confused reader swaps.
Longer entries first so that "불가능" is seen before "가능".
"""

from __future__ import annotations

_KO_MODIFIER_PAIRS = [
    ("불가능", "가능"), ("이상", "미만"), ("이하", "초과"), ("증가", "감소"), ("상승", "하락"), ("인상", "인하"),
    ("확대", "축소"), ("포함", "제외"), ("최대", "최소"), ("높은", "낮은"), ("높아", "낮아"), ("늘어", "줄어"),
    ("완화", "강화"), ("허용", "금지"), ("의무", "선택"), ("우대", "가산"), ("면제", "부과"), ("있습니다", "없습니다"),
]
_EN_MODIFIER_PAIRS = [
    ("increased", "decreased"), ("increase", "decrease"), ("higher", "lower"), ("more than", "less than"),
    ("above", "below"), ("at least", "at most"), ("gains", "losses"), ("rose", "fell"), ("grew", "declined"),
    ("improved", "deteriorated"), ("including", "excluding"),
]
_KO_TERM_PAIRS = [
    ("예금자보호 한도", "보장 대상"), ("전세보증금", "월세보증금"), ("전세", "월세"), ("원리금", "원금"), ("원금", "이자"),
    ("영업이익", "당기순이익"), ("고정금리", "변동금리"), ("신용카드", "체크카드"), ("해지환급금", "만기환급금"),
    ("중도상환수수료", "연체이자"), ("기준금리", "시장금리"), ("적금", "예금"), ("보험료", "보험금"),
    ("소득공제", "세액공제"), ("주택담보대출", "신용대출"), ("LTV", "DTI"), ("DSR", "DTI"), ("청약철회", "계약해지"),
    ("연회비", "수수료"), ("매출액", "영업이익"), ("자산", "부채"), ("현금서비스", "카드론"), ("가맹점", "카드회원"),
    ("보증료", "보증금"), ("비과세", "분리과세"),
]
_EN_TERM_PAIRS = [
    ("net interest income", "noninterest income"), ("net income", "operating income"), ("revenue", "net income"),
    ("total assets", "total liabilities"), ("deposits", "loans"), ("Tier 1", "Total capital"),
    ("principal", "interest"), ("fixed-rate", "variable-rate"), ("gross margin", "operating margin"),
    ("provision for credit losses", "net charge-offs"), ("common stock", "preferred stock"),
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

# Unverifiable material: specific-sounding details and opinions no evidence supports.
FABRICATED = {
    "ko": [
        "이 기준은 {year}년 {month}월부터 {pct}%포인트 범위에서 추가로 조정될 예정입니다.",
        "신청 후 평균 {days}일 이내에 처리되며, 온라인으로 신청하면 {fee}원의 수수료가 면제됩니다.",
        "{org}{wa}의 협약에 따라 최대 {amount}만 원까지 추가 지원을 받을 수 있습니다.",
        "지난해 이 제도를 이용한 사람은 약 {count}만 명으로 집계되었습니다.",
        "{month}월 말까지 신청하면 {pct}%의 우대금리가 추가로 적용됩니다.",
        "관련 민원은 {year}년 한 해 동안 {count}천 건 접수된 것으로 알려져 있습니다.",
        "비대면으로 가입한 경우에는 {days}일의 추가 숙려기간이 주어집니다.",
        "이 경우 {org} 본점 창구에서만 처리가 가능하며 처리 기간은 약 {days}영업일입니다.",
    ],
    "en": [
        "Management expects this figure to be revised by about {pct}% in the {quarter} quarter of {year}.",
        "The amount includes roughly ${amount} million attributable to the {org} acquisition.",
        "About {count},000 customers were affected, according to the company's internal review.",
        "The program is scheduled to be extended through {month_name} {year}.",
    ],
}
OPINIONS = {
    "ko": [
        "대부분의 소비자에게 가장 유리한 선택이라고 볼 수 있습니다.",
        "개인적으로는 크게 걱정하지 않으셔도 되는 수준이라고 생각합니다.",
        "솔직히 이 정도면 누구에게나 추천할 만한 조건입니다.",
        "현실적으로 손해를 볼 가능성은 거의 없다고 보셔도 됩니다.",
        "다른 상품과 비교해도 훨씬 안전하고 합리적인 방법입니다.",
        "이 부분은 크게 신경 쓰지 않아도 괜찮은 편입니다.",
    ],
    "en": [
        "In my view this makes the company one of the safest investments in its sector.",
        "Frankly, this is an excellent result that investors should welcome.",
        "This is clearly the most sensible strategy available to the bank.",
        "Honestly, there is little reason for concern here.",
    ],
}
ORGS = {"ko": ["시중은행", "주택도시보증공사", "지방자치단체", "서민금융진흥원", "한국주택금융공사", "신용회복위원회"],
        "en": ["Northbridge", "Crescent Financial", "Atlas Payments", "Summit Trust"]}
