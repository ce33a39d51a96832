"""Inter-rater agreement for the judge validation (K-FinHallu Table 1): percent agreement and
Gwet's AC1, human–human and human–LLM, per criterion.

Gwet's AC1 for r >= 2 raters and q categorical values (Gwet 2008, Br J Math Stat Psychol 61:29-48;
Gwet 2014, Handbook of Inter-Rater Reliability), missing ratings allowed:
  p_a   = mean over subjects rated by >= 2 raters of  sum_k r_ik (r_ik - 1) / (r_i (r_i - 1))
  pi_k  = mean over rated subjects of r_ik / r_i
  p_e   = sum_k pi_k (1 - pi_k) / (q - 1)
  AC1   = (p_a - p_e) / (1 - p_e)
With two raters and no missing ratings p_a is the share of identical ratings and pi_k the mean of
the two raters' marginal shares. Ratings are nominal: 1/2/3 are three categories, not a scale.

CSV layout (long, one rating per row, header required):
  item_id,criterion,rater,rating
  dlg-001,coherency,human_1,3
  dlg-001,coherency,llm,2
`rater` names the LLM judge when it equals the `llm_rater` argument (default "llm"); every other
rater is a human. A rating may be missing (the row left out, or an empty rating).
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from pathlib import Path
from typing import Hashable, Sequence

from finhallu.text.numbers import format_decimal

Ratings = Sequence[Sequence[Hashable | None]]  # subjects x raters; None = not rated


def _present(row: Sequence[Hashable | None]) -> list[Hashable]:
    return [x for x in row if x is not None]


def percent_agreement(ratings: Ratings) -> float:
    """Gwet's p_a: per subject, the share of agreeing rater pairs; averaged over subjects rated twice or more."""
    shares = []
    for row in ratings:
        got = _present(row)
        r = len(got)
        if r >= 2:
            shares.append(sum(c * (c - 1) for c in Counter(got).values()) / (r * (r - 1)))
    if not shares:
        raise ValueError("no subject was rated by two or more raters")
    return sum(shares) / len(shares)


def gwet_ac1(ratings: Ratings, categories: Sequence[Hashable] | None = None) -> dict[str, float]:
    """Gwet's AC1 with its parts: {"ac1", "pa", "pe", "subjects", "categories"}."""
    cats = list(categories) if categories is not None else sorted({x for row in ratings for x in _present(row)}, key=str)
    q = len(cats)
    pa = percent_agreement(ratings)
    rated = [_present(row) for row in ratings if _present(row)]
    pi = {k: sum(Counter(got)[k] / len(got) for got in rated) / len(rated) for k in cats}
    pe = sum(p * (1 - p) for p in pi.values()) / (q - 1) if q > 1 else 1.0
    ac1 = (pa - pe) / (1 - pe) if pe < 1 else 1.0  # one category only: complete agreement by construction
    return {"ac1": ac1, "pa": pa, "pe": pe, "subjects": float(sum(len(g) >= 2 for g in rated)), "categories": float(q)}


def cohen_kappa(ratings: Ratings) -> float:
    """Cohen's kappa for two raters (a cross-check beside AC1; subjects rated by both only)."""
    pairs = [(row[0], row[1]) for row in ratings if row[0] is not None and row[1] is not None]
    n = len(pairs)
    po = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return (po - pe) / (1 - pe) if pe < 1 else 1.0


def _norm(value: str) -> str | None:
    v = (value or "").strip()
    if not v:
        return None
    try:
        from decimal import Decimal

        return format_decimal(Decimal(v))  # "3", "3.0" and "3.00" are one category
    except Exception:
        return v.lower()


def read_ratings(path: str | Path) -> dict[str, dict[str, dict[str, str | None]]]:
    """{criterion: {item_id: {rater: rating}}} from the long CSV layout."""
    out: dict[str, dict[str, dict[str, str | None]]] = defaultdict(lambda: defaultdict(dict))
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        missing = {"item_id", "criterion", "rater", "rating"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)} (expected item_id,criterion,rater,rating)")
        for row in reader:
            out[row["criterion"].strip()][row["item_id"].strip()][row["rater"].strip()] = _norm(row["rating"])
    return out


def agreement_report(by_criterion: dict[str, dict[str, dict[str, str | None]]], llm_rater: str = "llm") -> list[dict]:
    """Per criterion: human–human (all human raters together) and human–LLM (each human paired with
    the LLM judge, averaged over humans) percent agreement and AC1."""
    rows = []
    for crit in sorted(by_criterion):
        items = by_criterion[crit]
        raters = sorted({r for ratings in items.values() for r in ratings})
        humans = [r for r in raters if r != llm_rater]
        cats = sorted({v for ratings in items.values() for v in ratings.values() if v is not None}, key=str)
        row: dict = {"criterion": crit, "items": len(items), "human_raters": len(humans)}
        if len(humans) >= 2:
            hh = [[items[i].get(h) for h in humans] for i in sorted(items)]
            stats = gwet_ac1(hh, cats)
            row.update(human_human_pa=stats["pa"], human_human_ac1=stats["ac1"])
        if llm_rater in raters and humans:
            per = [gwet_ac1([[items[i].get(h), items[i].get(llm_rater)] for i in sorted(items)], cats) for h in humans]
            row.update(human_llm_pa=sum(p["pa"] for p in per) / len(per), human_llm_ac1=sum(p["ac1"] for p in per) / len(per))
        rows.append(row)
    return rows


def format_report(rows: list[dict]) -> str:
    cols = ["criterion", "items", "human_human_pa", "human_human_ac1", "human_llm_pa", "human_llm_ac1"]
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else ("-" if v is None else str(v))  # noqa: E731
    lines = [" | ".join(cols), " | ".join("---" for _ in cols)]
    lines += [" | ".join(fmt(r.get(c)) for c in cols) for r in rows]
    return "\n".join(lines)
