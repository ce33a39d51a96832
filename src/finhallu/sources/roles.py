"""Section roles of filing blocks — financial statements, MD&A, risk factors, ... — found by
heading and content, whatever Item or section they follow (statements printed after "Item 15"
or "Item 16" are statements; Item 8 may be a one-line pointer)."""

from __future__ import annotations

import re

ROLES = (
    "business",
    "risk_factors",
    "mda",
    "market_risk",
    "financial_statements",
    "controls",
    "governance",
    "exhibits",
    "overview",
    "other",
)
_ITEM_ROLE = {
    "1": "business",
    "1A": "risk_factors",
    "1C": "risk_factors",
    "2": "business",
    "7": "mda",
    "7A": "market_risk",
    "8": "financial_statements",
    "9A": "controls",
    "9A(T)": "controls",
    "10": "governance",
    "11": "governance",
    "12": "governance",
    "13": "governance",
    "14": "governance",
    "15": "exhibits",
    "16": "exhibits",
}
_MARKERS = (
    "total assets",
    "total liabilities",
    "net income",
    "net loss",
    "net cash provided by",
    "net cash used in",
    "earnings per share",
    "stockholders' equity",
    "shareholders' equity",
    "stockholders’ equity",
    "shareholders’ equity",
    "operating activities",
    "gross margin",
    "gross profit",
    "cost of revenue",
    "cost of sales",
    "total revenue",
    "income before",
    "retained earnings",
    "total current assets",
)
_STATEMENT_HEADING = re.compile(
    r"^(?:the )?(?:consolidated |combined )?(?:balance sheets?|statements? of (?:consolidated )?(?:operations|income|earnings|"
    r"comprehensive (?:income|loss)|cash flows|(?:stockholders|shareholders)['’]? equity|changes in|financial (?:position|"
    r"condition))|notes to (?:the )?(?:consolidated )?financial statements|report of independent registered)",
    re.IGNORECASE,
)
_STATEMENTS_END = re.compile(r"^(?:exhibit index|index to exhibits|signatures?|exhibits?)\b", re.IGNORECASE)
_DART = (
    ("재무에 관한 사항", "financial_statements"),
    ("재무제표", "financial_statements"),
    ("이사의 경영진단", "mda"),
    ("사업의 내용", "business"),
    ("회사의 개요", "overview"),
    ("위험", "risk_factors"),
    ("감사", "governance"),
    ("이사회", "governance"),
    ("주주", "governance"),
    ("임원", "governance"),
)


def statement_table(text: str) -> bool:
    """A table with at least two statement line items and numbers in it."""
    low = text.lower()
    return sum(m in low for m in _MARKERS) >= 2 and len(re.findall(r"\d[\d,]{2,}", text)) >= 3


def tenk_roles(item: str, blocks: list[tuple[str, str]]) -> list[str]:
    """One role per block of an Item: the Item's role, except a statements region (from a statement
    heading or statement table to the exhibit index or signatures) outside MD&A."""
    base = _ITEM_ROLE.get(item.upper(), "other")
    out, inside = [], base == "financial_statements"
    for kind, text in blocks:
        head = text.strip()[:200]
        if base not in ("mda", "risk_factors"):
            if kind == "text" and len(text) < 200 and _STATEMENTS_END.match(head):
                inside = False
            elif (kind == "table" and statement_table(text)) or (
                kind == "text" and len(text) < 200 and _STATEMENT_HEADING.match(head)
            ):
                inside = True
        out.append("financial_statements" if inside else base)
    return out


def dart_role(section_path: str) -> str:
    for key, role in _DART:
        if key in (section_path or ""):
            return role
    return "other"
