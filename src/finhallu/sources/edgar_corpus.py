"""EDGAR-CORPUS item-split 10-K JSON (`cik`, `year`, `filename`, `item_1` ... `item_16`) -> documents.

One document per file (source 'sec10k'): each non-empty item becomes a run of paragraph blocks
under 'Item 7. Management's Discussion and Analysis ...' (standard titles, in the form's order;
pre-2004 filings get the old titles of Items 4 and 10-14). The item's own heading line and
trailing "PART III" leaks are dropped. Paragraphs are blank-line separated; hard-wrapped lines
of 1990s plain text are rewrapped, column-aligned tables keep their lines. Where a text has no
blank lines, each line is a paragraph unless the lines look hard-wrapped.

The company name comes from the crawler's metadata CSV next to the JSON (FILINGS_METADATA*.csv,
matched by filename, then CIK), else the JSON's `company`, else the text, else "CIK <cik>".
"""

from __future__ import annotations

import csv
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from finhallu.sources.roles import tenk_roles
from finhallu.sources import Block, LoadedDoc, Quarantined, register_source
from finhallu.sources.sec10k import ITEM_ORDER

ITEM_TITLES = {
    "1": "Business",
    "1A": "Risk Factors",
    "1B": "Unresolved Staff Comments",
    "1C": "Cybersecurity",
    "2": "Properties",
    "3": "Legal Proceedings",
    "4": "Mine Safety Disclosures",
    "5": "Market for Registrant's Common Equity, Related Stockholder Matters and Issuer Purchases of Equity Securities",
    "6": "Selected Financial Data",
    "7": "Management's Discussion and Analysis of Financial Condition and Results of Operations",
    "7A": "Quantitative and Qualitative Disclosures About Market Risk",
    "8": "Financial Statements and Supplementary Data",
    "9": "Changes in and Disagreements with Accountants on Accounting and Financial Disclosure",
    "9A": "Controls and Procedures",
    "9B": "Other Information",
    "9C": "Disclosure Regarding Foreign Jurisdictions that Prevent Inspections",
    "10": "Directors, Executive Officers and Corporate Governance",
    "11": "Executive Compensation",
    "12": "Security Ownership of Certain Beneficial Owners and Management and Related Stockholder Matters",
    "13": "Certain Relationships and Related Transactions, and Director Independence",
    "14": "Principal Accountant Fees and Services",
    "15": "Exhibits and Financial Statement Schedules",
    "16": "Form 10-K Summary",
}
# Titles before the 2003 amendments (Item 14 became the accountant fees item in filings from 2004)
# and before Dodd-Frank's mine safety item (filings from 2012).
_OLD_TITLES = {
    "4": "Submission of Matters to a Vote of Security Holders",
    "10": "Directors and Executive Officers of the Registrant",
    "12": "Security Ownership of Certain Beneficial Owners and Management",
    "13": "Certain Relationships and Related Transactions",
    "14": "Exhibits, Financial Statement Schedules, and Reports on Form 8-K",
}
_ITEM_KEY = re.compile(r"^item_(\d{1,2}[a-c]?)$", re.IGNORECASE)
_HEADING = re.compile(r"^\s*item\s*\d{1,2}\s*[a-c]?\b(?:\s*\(T\))?\s*[.:\-–—]?", re.IGNORECASE)
_PART_LINE = re.compile(r"^\s*part\s+[ivx]+\s*\.?\s*$", re.IGNORECASE)
_NOISE = re.compile(r"^\s*(?:\d{1,3}|-\s*\d{1,3}\s*-|table of contents|\(?continued\)?)\s*$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[•·●▪◦\-*o]|\(?[a-z0-9]{1,3}[.)])\s*$")
_COLUMNS = re.compile(r"\S {3,}\S|\t")
_FILENAME = re.compile(r"^(\d+)_([0-9A-Z-]+)_(\d{4})_")
_REGISTRANT = re.compile(r"([A-Z][A-Za-z0-9&.,' -]{2,80}?)\s*\(\s*Exact name of registrant", re.IGNORECASE)


def item_title(item: str, year: int | None) -> str:
    if year is not None:
        if item == "4" and year < 2012:
            return _OLD_TITLES["4"]
        if item in ("10", "12", "13", "14") and year < 2004:
            return _OLD_TITLES[item]
    return ITEM_TITLES.get(item, f"Item {item}")


# --------------------------------------------------------------------------- paragraphs


def _rewrap(lines: list[str]) -> str:
    """Join hard-wrapped lines into one paragraph; column-aligned text keeps its lines."""
    lines = [ln.rstrip() for ln in lines if ln.strip()]
    if not lines:
        return ""
    aligned = sum(bool(_COLUMNS.search(ln.strip())) for ln in lines)
    if len(lines) >= 2 and aligned * 2 >= len(lines):
        return "\n".join(ln.expandtabs(8) for ln in lines)
    text = ""
    for ln in lines:
        ln = re.sub(r"\s+", " ", ln).strip()
        if not text:
            text = ln
        elif re.search(r"[A-Za-z]-$", text):  # a word split at the margin: keep the hyphen, no space
            text += ln
        else:
            text += " " + ln
    return text


def _hard_wrapped(lines: list[str]) -> bool:
    body = [ln for ln in lines if ln.strip()]
    if len(body) < 4:
        return False
    widths = [len(ln.rstrip()) for ln in body]
    return max(widths) <= 100 and sum(45 <= w <= 90 for w in widths) >= 0.6 * len(body)


def _unwrap_lines(lines: list[str]) -> list[list[str]]:
    """Paragraphs of hard-wrapped text without blank lines: a short line ending a sentence, or an
    indented line, closes/opens one."""
    width = sorted(len(ln.rstrip()) for ln in lines)[int(len(lines) * 0.8)]
    paras: list[list[str]] = [[]]
    for ln in lines:
        if ln[:1].isspace() and ln.strip() and paras[-1]:
            paras.append([])
        paras[-1].append(ln)
        stripped = ln.rstrip()
        if len(stripped) < 0.75 * width and (stripped.endswith((".", ":", "?", "!", '"', ")")) or stripped.isupper()):
            paras.append([])
    return [p for p in paras if p]


def _line_paragraphs(lines: list[str]) -> list[list[str]]:
    """One paragraph per line, except where a page break cut a sentence: a long line without
    closing punctuation followed by a line starting in lower case continues it."""
    groups: list[list[str]] = []
    for ln in lines:
        prev = groups[-1][-1].rstrip() if groups else ""
        if (
            len(prev) >= 100
            and not prev.endswith((".", ":", ";", "?", "!", '"', "”", "'", "’", ")"))
            and ln.lstrip()[:1].islower()
        ):
            groups[-1].append(ln)
        else:
            groups.append([ln])
    return groups


def paragraphs(text: str) -> list[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\xa0", " ").replace("\u200b", "")
    if re.search(r"\n[ \t]*\n", text):
        groups = [chunk.split("\n") for chunk in re.split(r"\n[ \t]*\n+", text)]
    else:
        lines = [ln for ln in text.split("\n") if ln.strip()]
        groups = _unwrap_lines(lines) if _hard_wrapped(lines) else _line_paragraphs(lines)
    out: list[str] = []
    pending = ""
    for group in groups:
        para = _rewrap(group)
        if not para or _NOISE.match(para):
            continue
        if _BULLET.match(para):  # "•" on a line of its own belongs to the next line
            pending = (pending + " " + para.strip()).strip()
            continue
        if pending:
            para = f"{pending} {para}"
            pending = ""
        out.append(para)
    if pending:
        out.append(pending)
    while out and _PART_LINE.match(out[-1]):
        out.pop()
    return out


def item_paragraphs(text: str) -> list[str]:
    """Paragraphs of one item's text without its own heading line."""
    text = text.strip("\n")
    first, _, rest = text.lstrip().partition("\n")
    if _HEADING.match(first) and len(first) <= 300:
        text = rest
        if re.search(r"\n[ \t]*\n", rest):
            # Blank-line separated text: a heading wrapped over several upper-case lines ends at the blank line.
            lines = rest.split("\n")
            while lines and lines[0].strip() and len(lines[0].strip()) < 120 and _upper(lines[0]):
                lines.pop(0)
            text = "\n".join(lines)
    return paragraphs(text)


def _upper(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return bool(letters) and sum(c.isupper() for c in letters) >= 0.8 * len(letters)


# --------------------------------------------------------------------------- metadata


@lru_cache(maxsize=16)
def _metadata(csv_path: str, _mtime: int) -> tuple[dict[str, dict], dict[str, dict]]:
    by_name: dict[str, dict] = {}
    by_cik: dict[str, dict] = {}
    with open(csv_path, newline="", encoding="utf-8-sig", errors="replace") as fh:
        for row in csv.DictReader(fh):
            row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
            name = row.get("filename") or ""
            if name:
                by_name.setdefault(Path(name).stem, row)
            cik = (row.get("CIK") or row.get("cik") or "").lstrip("0")
            if cik:
                by_cik.setdefault(cik, row)
    return by_name, by_cik


def _csv_row(path: Path, filename: str | None, cik: str | None) -> dict | None:
    for csv_path in sorted(path.parent.glob("FILINGS_METADATA*.csv")):
        try:
            by_name, by_cik = _metadata(str(csv_path), csv_path.stat().st_mtime_ns)
        except (OSError, csv.Error):
            continue
        for key in (Path(filename).stem if filename else None, path.stem):
            if key and key in by_name:
                return by_name[key]
        if cik and cik in by_cik:
            return by_cik[cik]
    return None


def clean_company(name: str) -> str:
    """EDGAR conformed names: 'HOME HEALTH CORP OF AMERICA INC \\PA\\' -> without the state tag, 'WALT DISNEY CO/' -> no slash."""
    name = re.sub(r"\s*[\\/][A-Z]{2,3}[\\/]?\s*$", "", name.strip())
    return re.sub(r"\s*/+\s*$", "", name).strip()


# --------------------------------------------------------------------------- loader


@register_source("edgar_corpus", patterns=("*.json",), langs=("en",))
def load_edgar_corpus(path: Path) -> Iterator[LoadedDoc | Quarantined]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        yield Quarantined("sec10k", str(path), None, None, f"malformed JSON: {exc}")
        return
    if not isinstance(data, dict):
        yield Quarantined("sec10k", str(path), None, None, f"top level is a JSON {type(data).__name__}, not an object")
        return
    items: dict[str, str] = {}
    for key, value in data.items():
        m = _ITEM_KEY.match(str(key))
        if not m:
            continue
        item = m.group(1).upper()
        if item not in ITEM_ORDER:
            continue
        if value is None:
            continue
        if not isinstance(value, str):
            yield Quarantined("sec10k", str(path), None, key, f"item text is a {type(value).__name__}, not a string")
            continue
        items[item] = value
    if not items:
        yield Quarantined("sec10k", str(path), None, "item_*", "no EDGAR-CORPUS item fields (item_1, item_7, ...)")
        return
    filename = data.get("filename") if isinstance(data.get("filename"), str) else None
    fm = _FILENAME.match(filename or path.name)
    cik = str(data.get("cik") or (fm.group(1) if fm else "")).strip().lstrip("0")
    if not cik:
        yield Quarantined("sec10k", str(path), None, "cik", "no `cik` field and none in the file name")
        return
    year = _year(data.get("year")) or (int(fm.group(3)) if fm else None) or _year(data.get("filing_date"))
    meta = _csv_row(path, filename, cik)
    company = (meta or {}).get("Company") or data.get("company") or _company_from_text(items) or f"CIK {cik}"
    company = clean_company(str(company)) or f"CIK {cik}"
    published = (
        data.get("period_of_report")
        or (meta or {}).get("Period of Report")
        or data.get("filing_date")
        or (meta or {}).get("Filing Date")
        or None
    )

    doc_id = f"sec10k-{cik}-{year or 'na'}"
    blocks: list[Block] = []
    for item in ITEM_ORDER:
        text = items.get(item)
        if not text or not text.strip():
            continue
        section = f"Item {item}. {item_title(item, year)}"
        paras = item_paragraphs(text)
        for j, (para, role) in enumerate(zip(paras, tenk_roles(item, [("text", p) for p in paras]))):
            blocks.append(Block(f"{doc_id}-item{item}-{j + 1}", section, "text", para, role))
    if not blocks:
        yield Quarantined("sec10k", str(path), doc_id, "item_*", "every item is empty")
        return
    yield LoadedDoc(
        doc_id=doc_id,
        source="sec10k",
        institution=company,
        lang="en",
        title=f"{company} Form 10-K" + (f" ({year})" if year else ""),
        doc_type="10-K",
        published=str(published) if published else None,
        source_path=str(path),
        blocks=blocks,
    )


def _year(value) -> int | None:
    m = re.match(r"^\s*(\d{4})", str(value or ""))
    return int(m.group(1)) if m else None


def _company_from_text(items: dict[str, str]) -> str | None:
    for item in ITEM_ORDER:
        m = _REGISTRANT.search(items.get(item, "")[:20000])
        if m:
            return m.group(1).strip(" ,")
    return None
