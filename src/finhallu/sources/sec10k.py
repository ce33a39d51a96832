"""SEC 10-K main documents (HTML and inline XBRL) -> text by Item.

Item headings vary ("ITEM 7.", "Item 7 –", bold spans, any case) and the table of contents
repeats them; for each Item we keep the heading occurrence followed by the most text, which
is the body rather than the contents line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import lxml.etree
import lxml.html

from finhallu.sources import Block, LoadedDoc, Quarantined, register_source
from finhallu.sources.encoding import decode_bytes
from finhallu.sources.furniture import strip_furniture
from finhallu.sources.roles import tenk_roles
from finhallu.sources.filing_tables import to_markdown as filing_table_markdown
from finhallu.sources.tables import span

ITEM_RE = re.compile(
    # "(T)": smaller reporting companies' "Item 9A(T)" (2008-2010 filings).
    r"^\s*item\s*(1a|1b|1c|7a|9a|9b|9c|1[0-6]|[1-9])(?:\s*\(T\))?\s*(?:[.:\-–—]|\s)\s*(.{0,160})$",
    re.IGNORECASE | re.DOTALL,
)
ITEM_ORDER = [
    "1",
    "1A",
    "1B",
    "1C",
    "2",
    "3",
    "4",
    "5",
    "6",
    "7",
    "7A",
    "8",
    "9",
    "9A",
    "9B",
    "9C",
    "10",
    "11",
    "12",
    "13",
    "14",
    "15",
    "16",
]
_BLOCK_TAGS = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "table", "pre", "center", "font", "br"}
_HTML_END = re.compile(r"</html\s*>", re.IGNORECASE)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"


def _text(el) -> str:
    for br in el.iter("br"):  # "September 28,<br>2024" reads as two words
        br.tail = " " + (br.tail or "")
    return re.sub(r"\s+", " ", el.text_content() or "").strip()


def _table_markdown(table) -> str:
    rows = [
        [(_text(td), span(td.get("rowspan")), span(td.get("colspan"))) for td in tr if td.tag in ("td", "th")]
        for tr in table.iter("tr")
    ]
    md, unit = filing_table_markdown(rows)
    return f"({unit.strip('()')})\n{md}" if md and unit else md


def _has_block_child(el) -> bool:
    return any(isinstance(c.tag, str) and c.tag.lower() in _BLOCK_TAGS - {"br", "font"} for c in el)


def _blocks(body) -> list[tuple[str, str]]:
    """Document-order (kind, text) blocks: leaf paragraphs/divs and whole tables."""
    out: list[tuple[str, str]] = []

    def walk(el):
        for child in el:
            if not isinstance(child.tag, str):
                continue
            tag = child.tag.lower()
            if tag in ("script", "style", "head", "title") or tag.endswith("header"):
                continue
            style = (child.get("style") or "").replace(" ", "").lower()
            if "display:none" in style:
                continue
            if tag == "table":
                text = _text(child)
                if not text:
                    continue
                md = _table_markdown(child)
                # A one-row or one-cell "table" is layout: treat it as text (old filings put headings in tables).
                if md.count("\n") <= 2 or len(set(md.replace("|", "").split())) <= 3:
                    out.append(("text", text))
                else:
                    out.append(("table", md))
            elif tag in _BLOCK_TAGS and not _has_block_child(child):
                text = _text(child)
                if text:
                    out.append(("text", text))
            else:
                walk(child)
            if child.tail and child.tail.strip() and el.tag.lower() in ("body", "div", "td"):
                out.append(("text", re.sub(r"\s+", " ", child.tail).strip()))

    walk(body)
    return _continued_tables(out)


def _header_cells(md: str) -> tuple[int, list[str]] | None:
    """(line index, cells) of a Markdown table's header row."""
    lines = md.splitlines()
    i = next((k for k, ln in enumerate(lines) if ln.startswith("|")), None)
    return None if i is None else (i, [c.strip() for c in lines[i].strip().strip("|").split("|")])


def _continued_tables(blocks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A table whose header names no column, right after a table of the same width that does, is its
    continuation (Apple's "Gross margin percentage:" rows sit in their own <table> under the
    2024/2023/2022 of the one before): it takes that header's column names, keeping its own label."""
    out = list(blocks)
    for k in range(1, len(out)):
        (pk, prev), (kind, md) = out[k - 1], out[k]
        if kind != "table" or pk != "table":
            continue
        mine, theirs = _header_cells(md), _header_cells(prev)
        if not mine or not theirs or len(mine[1]) != len(theirs[1]) or any(mine[1][1:]) or not all(theirs[1][1:]):
            continue
        lines = md.splitlines()
        lines[mine[0]] = "| " + " | ".join([mine[1][0]] + theirs[1][1:]) + " |"
        out[k] = (kind, "\n".join(lines))
    return out


def _meta(raw: str, root) -> dict:
    meta: dict[str, str] = {}
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.lower().endswith(("nonnumeric", "nonfraction")):
            name = (el.get("name") or "").split(":")[-1]
            if (
                name
                in (
                    "EntityRegistrantName",
                    "EntityCentralIndexKey",
                    "DocumentFiscalYearFocus",
                    "DocumentPeriodEndDate",
                    "CurrentFiscalYearEndDate",
                )
                and name not in meta
            ):
                meta[name] = _text(el)
    head = re.sub(r"\s+", " ", lxml.html.fromstring(raw[:400_000].encode("utf-8", "ignore")).text_content())[:20000]
    if "EntityCentralIndexKey" not in meta:
        m = re.search(r"Central Index Key[:\s]*([0-9]{6,10})", head)
        if m:
            meta["EntityCentralIndexKey"] = m.group(1)
    if "DocumentPeriodEndDate" not in meta:
        m = re.search(rf"fiscal year ended\s*[:]?\s*((?:{_MONTHS})\s+\d{{1,2}},?\s+\d{{4}})", head, re.IGNORECASE)
        if m:
            meta["DocumentPeriodEndDate"] = m.group(1)
    if "DocumentFiscalYearFocus" not in meta and meta.get("DocumentPeriodEndDate"):
        meta["DocumentFiscalYearFocus"] = meta["DocumentPeriodEndDate"][-4:]
    if "EntityRegistrantName" not in meta:
        m = re.search(r"([A-Z][A-Za-z0-9&.,' -]{2,80}?)\s*\(\s*Exact name of registrant", head, re.IGNORECASE)
        if m:
            meta["EntityRegistrantName"] = re.split(r"[0-9]\s+|\.\s+", m.group(1))[-1].strip(" ,")
    if "EntityRegistrantName" not in meta:
        m = re.search(
            r"([A-Z][A-Za-z0-9&.,' -]{2,80}?(?:,? Inc\.|Corporation|Corp\.|Company|Bancorp|N\.A\.|Ltd\.|plc|L\.P\.))", head
        )
        if m:
            meta["EntityRegistrantName"] = m.group(1).strip(" ,")
    return meta


def split_items(blocks: list[tuple[str, str]]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """[(item, heading, blocks)] choosing, per item, the heading followed by the most text."""
    cands: list[tuple[int, str, str]] = []  # (block index, item, heading)
    for i, (kind, text) in enumerate(blocks):
        if kind != "text" or len(text) > 220:
            continue
        m = ITEM_RE.match(text)
        # A repeat of the item just seen (running page header, "Item 14 (a)(2):" sub-heading) belongs to it.
        if m and not (cands and cands[-1][1] == m.group(1).upper()):
            cands.append((i, m.group(1).upper(), text))
    if not cands:
        return []
    positions = [c[0] for c in cands] + [len(blocks)]
    best: dict[str, tuple[int, int, str]] = {}
    for k, (i, item, heading) in enumerate(cands):
        span = sum(len(t) for _, t in blocks[i + 1 : positions[k + 1]])
        if item not in best or span > best[item][1]:
            best[item] = (i, span, heading)
    chosen = sorted((i, item, heading) for item, (i, span, heading) in best.items())
    # Keep items in ascending document order by item number (drops stray cross-references).
    ordered, last_rank = [], -1
    for i, item, heading in chosen:
        rank = ITEM_ORDER.index(item) if item in ITEM_ORDER else -1
        if rank > last_rank:
            ordered.append((i, item, heading))
            last_rank = rank
    out = []
    for k, (i, item, heading) in enumerate(ordered):
        end = ordered[k + 1][0] if k + 1 < len(ordered) else len(blocks)
        out.append((item, heading, blocks[i + 1 : end]))
    return out


@register_source("sec10k", patterns=("*.htm", "*.html", "*.xhtml"), langs=("en",))
def load_10k(path: Path) -> Iterator[LoadedDoc | Quarantined]:
    data = path.read_bytes()
    try:
        raw, _ = decode_bytes(data, ("utf-8", "cp1252"))
    except UnicodeDecodeError:
        raw = data.decode("utf-8", errors="replace")  # a few undefined cp1252 bytes: keep the filing
    try:
        root = lxml.html.fromstring(raw.encode("utf-8"))
    except (lxml.etree.ParserError, ValueError) as exc:
        yield Quarantined("sec10k", str(path), None, None, f"cannot parse HTML: {exc}")
        return
    meta = _meta(raw, root)
    for hidden in root.xpath("//*[local-name()='header']"):
        hidden.getparent().remove(hidden)
    body = root.find("body") if root.find("body") is not None else root
    items = split_items(strip_furniture(_blocks(body)))
    if not items:
        yield Quarantined("sec10k", str(path), None, "Item headings", "no 10-K Item headings found")
        return
    company = meta.get("EntityRegistrantName") or path.stem
    cik = (meta.get("EntityCentralIndexKey") or "").lstrip("0") or None
    year = meta.get("DocumentFiscalYearFocus")
    doc_id = f"sec10k-{cik or re.sub(r'[^A-Za-z0-9]+', '-', path.stem)}-{year or 'na'}"
    blocks: list[Block] = []
    for item, heading, item_blocks in items:
        section = f"Item {item}. " + re.sub(r"^\s*item\s*\w+(?:\s*\(T\))?\s*[.:\-–—]?\s*", "", heading, flags=re.IGNORECASE)[:120]
        for j, ((kind, text), role) in enumerate(zip(item_blocks, tenk_roles(item, item_blocks))):
            blocks.append(Block(f"{doc_id}-item{item}-{j + 1}", section.strip(), kind, text, role))
        if not item_blocks:  # an empty Item ("Item 6. [Reserved]") stays a section, with no text
            blocks.append(Block(f"{doc_id}-item{item}-0", section.strip(), "text", "", tenk_roles(item, [("text", "")])[0]))
    if not _HTML_END.search(raw[-4000:]):
        yield Quarantined(
            "sec10k",
            str(path),
            doc_id,
            "file",
            "the file ends before </html> (truncated?): the document was loaded from the part that is there",
        )
    yield LoadedDoc(
        doc_id=doc_id,
        source="sec10k",
        institution=company,
        lang="en",
        title=f"{company} Form 10-K" + (f" FY{year}" if year else ""),
        doc_type="10-K",
        published=meta.get("DocumentPeriodEndDate"),
        source_path=str(path),
        blocks=blocks,
    )
