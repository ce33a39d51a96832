"""Semantic deduplication of question candidates (FinDartBench).

1. Embed every candidate (the build's embedder) and link pairs whose cosine reaches
   `cluster_threshold` (single link): candidate clusters.
2. The `group_questions` operation splits each multi-member cluster into groups of questions
   that ask for the same thing (an LLM, or rules: same period, same kind of answer, same
   metric words once company names and question phrasing are set aside).
3. One representative per group (the first generator's, then the shortest).
4. Residual near-duplicates: a representative whose cosine with an already kept one reaches
   `near_duplicate_threshold` is dropped (unless the two differ in a year or a code: templated
   questions about two periods or segments differ in a token or two and are no duplicates).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from finhallu.llm.operations import operation
from finhallu.llm.router import LLMRouter
from finhallu.text.words import content_word_set, strip_particle


class GroupsOut(BaseModel):
    groups: list[list[int]]  # a partition of the question indices: each group asks for the same thing


# Question phrasing, not content: what generators wrap around the metric they ask about.
_PHRASING = {
    "얼마",
    "규모",
    "금액",
    "수치",
    "어떻게",
    "공시",
    "공시한",
    "기준",
    "몇",
    "퍼센트",
    "알려주세요",
    "알려",
    "주세요",
    "전기",
    "대비",
    "얼마나",
    "what",
    "was",
    "how",
    "much",
    "many",
    "did",
    "report",
    "reported",
    "according",
    "form",
    "10-k",
    "fiscal",
    "percentage",
    "by",
    "have",
    "were",
    "there",
    "amount",
    "figure",
    "level",
    "tell",
    "me",
    "company",
    "value",
    "되나",
    "입니",
    "였나",
    "이었나",
    "during",
    "the",
}
_ENDINGS = re.compile(
    r"(이었나요|였나요|입니까|인가요|인지|일까요|되나요|됩니까|하였습니까|했나요|했습니까|었나요|"
    r"습니까|나요|까요|이었|였)$"
)
_PERIOD = re.compile(
    r"제\s?\d+\s?기\s?(?:반기말|반기|\d분기말|\d분기|말)?|(?:19|20)\d{2}(?:\s?년(?:도)?(?:에|의|말)?)?|"
    r"상반기|반기|당기|전기말"
)
_TERM_NO = re.compile(r"제\s?\d+\s?기")  # a term number restates the year given beside it


def anchor_tokens(question: str) -> frozenset[str]:
    """Digits and Latin tokens of a question: the years and codes two look-alike questions differ in."""
    return frozenset(t.lower() for t in re.findall(r"[A-Za-z0-9]+", _TERM_NO.sub(" ", question)))


_PCT = re.compile(r"%|퍼센트|비율|percentage|ratio|margin|rate", re.IGNORECASE)
_CHANGE = re.compile(r"증가|감소|늘었|줄었|increase|decrease|change|grow|decline", re.IGNORECASE)


_TOKEN = re.compile(r"[\w][\w\-·&%]*")


def _metric_tokens(text: str) -> list[str]:
    """Whole tokens ("SETK-P", "단기당기손익-공정가치금융자산"), particles and question endings removed."""
    out = []
    for tok in _TOKEN.findall(text.lower()):
        tok = _ENDINGS.sub("", strip_particle(tok)) if re.search("[가-힣]", tok) else tok
        out.append(tok)
    return out


def question_signature(question: str, company: str) -> tuple[frozenset, frozenset, str]:
    """(metric words, period mentions, kind of answer) of a question."""
    periods = frozenset(re.sub(r"\s|년(?:도)?(?:에|의|말)?$", "", m) for m in _PERIOD.findall(question))
    skip = set(_metric_tokens(company)) | content_word_set(company) | _PHRASING
    words = set()
    for w in _metric_tokens(_PERIOD.sub(" ", question)):
        if len(w) >= 2 and w not in skip and not w[0].isdigit() and not _CHANGE.search(w):
            words.add(w)
    kind = "change" if _CHANGE.search(question) else ("ratio" if _PCT.search(question) else "amount")
    return frozenset(words), periods, kind


def same_request(a: tuple, b: tuple, min_overlap: float = 0.8) -> bool:
    (wa, pa, ka), (wb, pb, kb) = a, b
    if pa != pb or ka != kb or not (wa and wb):
        return False
    return len(wa & wb) / len(wa | wb) >= min_overlap


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)

    def groups(self, n: int) -> list[list[int]]:
        out: dict[int, list[int]] = {}
        for i in range(n):
            out.setdefault(self.find(i), []).append(i)
        return sorted(out.values())


@operation("group_questions", GroupsOut)
def group_questions(questions: list[str], company: str, lang: str) -> GroupsOut:
    """Rules backend: questions asking for the same metric, period and kind of answer group together."""
    sigs = [question_signature(q, company) for q in questions]
    uf = _UnionFind(len(questions))
    for i in range(len(questions)):
        for j in range(i + 1, len(questions)):
            if same_request(sigs[i], sigs[j]):
                uf.union(i, j)
    return GroupsOut(groups=uf.groups(len(questions)))


def _partition(groups: list[list[int]], n: int) -> list[list[int]]:
    """An operation's grouping made a partition of range(n): unknown or repeated indices ignored,
    missing ones become groups of their own (an LLM may omit some)."""
    seen: set[int] = set()
    out = []
    for g in groups:
        keep = [i for i in g if 0 <= i < n and i not in seen]
        seen.update(keep)
        if keep:
            out.append(sorted(keep))
    out += [[i] for i in range(n) if i not in seen]
    return sorted(out)


@dataclass
class DedupResult:
    groups: list[list[int]]  # semantically equivalent candidates (indices)
    representatives: list[int]  # one per group
    kept: list[int]  # representatives left after the cosine filter
    near_duplicates: int  # representatives the cosine filter removed

    @property
    def compression_rate(self) -> float:
        n = sum(len(g) for g in self.groups)
        return 1 - len(self.kept) / n if n else 0.0


def deduplicate(
    questions: list[str],
    vectors: np.ndarray,
    rank: list[tuple],
    llm: LLMRouter,
    role: str,
    company: str,
    lang: str,
    cluster_threshold: float,
    near_duplicate_threshold: float,
) -> DedupResult:
    """`vectors`: L2-normalized rows; `rank`: per candidate, the sort key that picks representatives."""
    n = len(questions)
    if n == 0:
        return DedupResult([], [], [], 0)
    sims = vectors @ vectors.T
    uf = _UnionFind(n)
    for i, j in zip(*np.nonzero(np.triu(sims >= cluster_threshold, k=1))):
        uf.union(int(i), int(j))
    groups: list[list[int]] = []
    for cluster in uf.groups(n):
        if len(cluster) == 1:
            groups.append(cluster)
            continue
        out = llm.call(role, "group_questions", questions=[questions[i] for i in cluster], company=company, lang=lang)
        if out is None:  # the grouping call failed (recorded in llm_calls): keep the embedding cluster's members apart
            groups += [[i] for i in cluster]
            continue
        groups += [[cluster[k] for k in g] for g in _partition(out.groups, len(cluster))]
    groups.sort()
    reps = [min(g, key=lambda i: rank[i]) for g in groups]
    anchors = [anchor_tokens(q) for q in questions]
    squeezed = [re.sub(r"\s+", "", q) for q in questions]
    kept: list[int] = []
    for r in sorted(reps, key=lambda i: rank[i]):
        # near-identical wording about another year or code ("2023년" vs "2024년", "DX 부문" vs "DS 부문")
        # is no duplicate: an embedding barely sees the one token that differs; spacing variants are
        dup = any(
            squeezed[r] == squeezed[k] or (sims[r, k] >= near_duplicate_threshold and anchors[r] == anchors[k]) for k in kept
        )
        if not dup:
            kept.append(r)
    kept.sort()
    return DedupResult(groups, sorted(reps), kept, len(reps) - len(kept))
