"""Subjective opinions composed about the turn's own subject (Unverifiable / subjective_opinion).

An opinion is a judgement the evidence does not state. A fixed list of whole opinion sentences
lets a detector learn the list; here each opinion is composed from three parts: an optional
stance opener, a subject built from the turn (the question's topic, or the aspect of it the
evidence talks about: a rate, fee, limit, ratio, income line mined from the turn's own
passages), and an evaluative predicate or a piece of advice (in the register the passages' own
advice has, which faithful answers pass on: dialogue/assistant._GUIDANCE). The two injector variants use disjoint predicate sets
(different phrasing, same kind of claim). Every predicate carries an evaluative word (유리,
안심, 합리적, sensible, little reason ...) that both label checks read as an opinion.
"""

from __future__ import annotations

import random
import re

from finhallu.text.phrases import noun_phrases, topic_of
from finhallu.text.words import particle

# Aspect heads: what a financial claim is about (Korean compounds ending in one; English phrases).
_KO_ASPECTS = (
    "금리",
    "이율",
    "수수료",
    "한도",
    "비율",
    "공제",
    "세율",
    "이자",
    "환급금",
    "보험료",
    "보험금",
    "수익률",
    "보증료",
    "충당금",
    "자본비율",
    "부담",
    "조건",
    "기간",
    "요건",
    "혜택",
    "규모",
    "수익",
    "이익",
    "부채",
    "자산",
)
_EN_ASPECT = re.compile(
    r"\b((?:[a-z][a-z\-]+\s){0,2}(?:income|expense|ratio|margin|capital|deposits|loans|revenue|"
    r"earnings|liquidity|dividends?|growth|charge-offs|allowance|efficiency|yield|costs?))\b"
)

# Many short openers and frames, none frequent: an opinion is told by what it claims, not by a stock phrase.
# Most without an opener (7 in 10), and the subject mostly as a faithful answer names it ("{t}은/는"): a rare
# frame or stance phrase in every opinion would itself be the label.
_KO_OPEN = [""] * 40 + [
    "개인적으로는 ",
    "제 생각에는 ",
    "솔직히 ",
    "종합해 보면 ",
    "현실적으로 ",
    "여러 조건을 감안하면 ",
    "이용자 입장에서 보면 ",
    "길게 보면 ",
    "제가 보기에는 ",
    "경험상 ",
    "냉정하게 말하면 ",
    "대체로 ",
    "결국 ",
    "사실 ",
    "무엇보다 ",
    "전반적으로 ",
    "실무적으로는 ",
]
_KO_SUBJECT = (
    ["{t}{eun} "] * 4
    + ["{t}의 {a}{eun} "] * 2
    + [
        "{a} 면에서 {t}{eun} ",
        "이 정도 {a}{ramyeon} ",
        "{t}{eun} {a} 측면에서 ",
        "{t}의 경우 ",
        "{a}만 놓고 보더라도 ",
        "{t} 자체는 ",
        "지금의 {a}{eun} ",
        "{t}에서 {a}{eun} ",
        "이 {a} 수준이라면 ",
    ]
)
# Judgements any subject takes (a risk, a rule, a figure) ...
_KO_GENERIC = [
    "크게 걱정하실 필요는 없다고 생각합니다.",
    "지나치게 걱정하실 일은 아니라고 판단됩니다.",
    "현재로서는 합리적인 수준이라고 생각합니다.",
    "소비자 입장에서 바람직한 방향이라고 생각합니다.",
    "이 정도면 안심하셔도 되는 수준입니다.",
    "실제로 불리해질 일은 거의 없다고 판단됩니다.",
    "크게 신경 쓰지 않으셔도 괜찮은 수준입니다.",
    "충분히 납득할 만한 합리적 기준입니다.",
    # the register a passage's own advice has (dialogue/assistant._GUIDANCE), which faithful answers pass on
    "특별히 걱정하지 않으셔도 되는 부분입니다.",
    "대부분의 경우 안전하다고 보셔도 됩니다.",
    "지금 기준으로도 충분히 바람직한 수준입니다.",
    "일반적인 이용자라면 괜찮다고 보셔도 됩니다.",
    # advice the evidence does not give, in the register of the advice it does give
    "따로 비교해 보지 않고 정하셔도 좋습니다.",
    "다른 조건보다 먼저 고려해 보시기 바랍니다.",
    "가능하면 서둘러 알아보시는 것이 좋습니다.",
    "지금 기준에 맞춰 정해 두시는 것이 좋습니다.",
]
# ... and those that need something one chooses or pays (a product, a rate, a fee): with an aspect only.
_KO_CHOICE = [
    "다른 선택지보다 유리한 편입니다.",
    "안심하고 이용하셔도 됩니다.",
    "적극적으로 활용해 보시기를 추천합니다.",
    "결과적으로 좋은 선택이 될 가능성이 높습니다.",
    "소비자에게 꽤 유리하게 작용합니다.",
    "지금 시점에서는 추천할 만합니다.",
    "위험 부담이 크지 않아 비교적 안전하다고 생각합니다.",
    "이용자의 부담을 덜어 주는 훌륭한 장치입니다.",
    "기대 이상으로 합리적으로 설계되어 있습니다.",
    "무리 없이 감당할 만하다고 생각합니다.",
    "조건이 바뀌기 전에 이용해 두시는 편이 유리합니다.",
    "다른 상품을 알아보기보다 먼저 선택하시는 것이 바람직합니다.",
    "굳이 다른 곳과 비교하지 않으셔도 괜찮습니다.",
    "망설일 이유 없이 추천할 만한 조건입니다.",
    "길게 보면 충분히 좋은 선택입니다.",
    "이용자라면 챙겨 두는 것이 바람직합니다.",
    "여유가 있다면 한도까지 늘려 두시는 것이 좋습니다.",
    "만기까지 유지하시기를 권해 드립니다.",
    "다른 상품보다 먼저 신청해 보시기 바랍니다.",
    "조건을 따로 따지지 않고 이용하셔도 좋습니다.",
]
_EN_OPEN = [
    "",
    "",
    "",
    "In my view, ",
    "Frankly, ",
    "Honestly, ",
    "On balance, ",
    "To be fair, ",
    "Taken together, ",
    "I would say ",
    "Overall, ",
    "Personally, ",
    "All things considered, ",
    "If you ask me, ",
]
_EN_SUBJECT = [
    "{e}'s {a} ",
    "the {a} figure ",
    "this level of {a} ",
    "{e}'s position on {a} ",
    "the trend in {a} ",
    "the {a} line ",
    "{e}'s handling of {a} ",
    "the reported {a} ",
    "a {a} like this ",
]
_EN_PRED = [
    "looks sensible for a lender of this size.",
    "is, I think, a reassuring figure for shareholders.",
    "is an excellent result.",
    "leaves little reason for concern.",
    "is, I believe, a good sign for future growth.",
    "makes the stock one of the safest in its peer group.",
    "is one reason I would recommend the shares.",
    "reflects a sensible approach by management.",
    "is, I believe, stronger than it first appears.",
    "gives investors little reason to worry about the rate environment.",
    "is, I think, a good sign for dividends.",
    "strikes a sensible balance between growth and risk.",
    "is healthier than the market seems to think, frankly.",
    "is an excellent base for the coming year.",
]


def _half(items: list[str], variant: str) -> list[str]:
    # The two injectors take interleaved halves: different phrasing, the same kinds of judgement.
    return items[0::2] if variant.endswith("a") else items[1::2]


def aspects(view) -> list[str]:
    """Aspects of the turn's subject named in its response and gold passage (corpus words, not a list
    of claims): Korean compounds ending in an aspect head, English financial noun phrases."""
    found: list[str] = []
    for text in (view.turn.get("response") or "", view.gold_text or ""):
        if view.lang == "en":
            cands = [m.group(1) for m in _EN_ASPECT.finditer(text)]
        else:
            cands = [p for p, _, _ in noun_phrases(text) if p.endswith(_KO_ASPECTS) and len(p) <= 12]
        found += [c for c in cands if c not in found]
    return found[:6]


def _entity(view) -> str:
    """The filer an English opinion is about: a capitalised name the evidence repeats, else 'the company'."""
    text = " ".join([view.gold_text or ""] + view.evidence[:3])
    names = re.findall(r"\b([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)\s(?:Bancorp|Bank|Inc|Corporation|Holdings|Financial)", text)
    return names[0] if names else "the company"


def compose_opinion(view, rng: random.Random) -> str:
    topic = topic_of(view.turn.get("standalone_query") or view.turn.get("query") or "", view.lang)
    found = aspects(view)
    aspect = rng.choice(found) if found else None
    if view.lang == "en":
        frames = [f for f in _EN_SUBJECT if aspect or "{a}" not in f] or ["{e}'s results "]
        subject = rng.choice(frames).format(e=_entity(view), a=aspect or topic)
        opener = rng.choice(_EN_OPEN)
        body = subject + rng.choice(_half(_EN_PRED, view.variant))
        return opener + body if opener else body[0].upper() + body[1:]
    frames = [f for f in _KO_SUBJECT if aspect or "{a}" not in f]
    preds = _half(_KO_GENERIC + (_KO_CHOICE if aspect else []), view.variant)
    return rng.choice(_KO_OPEN) + _ko_subject(rng.choice(frames), topic, aspect or "") + rng.choice(preds)


def _ko_subject(frame: str, topic: str, aspect: str) -> str:
    # the particle follows the word it attaches to: the aspect in "{a}{eun}", else the topic
    word = aspect if "{a}{eun}" in frame else topic
    return frame.format(t=topic, a=aspect, eun=particle(word, "은/는"), ramyeon=particle(aspect, "이면/라면"))
