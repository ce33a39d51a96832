"""OpenDART document XML (dart3.xsd, what `document.xml` returns in its ZIP).

Real files declare utf-8 but are often cp949: the bytes decide, not the declaration.
SECTION-n/TITLE nesting becomes a section path; P -> text, TABLE (TR/TH/TD/TU/TE) -> Markdown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import lxml.etree

from finhallu.sources import Block, LoadedDoc, Quarantined, register_source
from finhallu.sources.encoding import decode_bytes
from finhallu.sources.roles import dart_role
from finhallu.sources.tables import grid_to_markdown, span

_CELL_TAGS = {"TD", "TH", "TU", "TE"}
_UNIT_RE = re.compile(r"^\(?\s*단위\s*[:：]")
_BARE_AMP = re.compile(r"&(?!(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9._-]*);)")
_BARE_LT = re.compile(r"<(?!/?[A-Za-z]|!|\?)")


def _text(el) -> str:
    return re.sub(r"\s+", " ", "".join(el.itertext())).strip()


def _table_md(table) -> str:
    rows = []
    for tr in table.iter("TR"):
        rows.append(
            [
                (_text(c), span(c.get("ROWSPAN")), span(c.get("COLSPAN")))
                for c in tr
                if isinstance(c.tag, str) and c.tag in _CELL_TAGS
            ]
        )
    return grid_to_markdown(rows)


class _BodyWalker:
    """BODY -> blocks: SECTION-n/TITLE nesting becomes the section path; consecutive P become one
    text block; each TABLE one table block, captioned by the unit note (단위) printed above it."""

    def __init__(self, doc_id: str):
        self.doc_id = doc_id
        self.blocks: list[Block] = []

    def blocks_of(self, body) -> list[Block]:
        self._walk(body, [])
        return self.blocks

    def _add(self, titles: list[str], kind: str, text: str) -> None:
        path = " > ".join(titles)  # the current section's path, its own TITLE included
        self.blocks.append(Block(f"{self.doc_id}-b{len(self.blocks) + 1}", path, kind, text, dart_role(path)))

    def _walk(self, el, path_titles: list[str]) -> None:
        pending: list[str] = []
        unit_note = ""
        titles = list(path_titles)

        def flush():
            if pending:
                self._add(titles, "text", "\n".join(pending))
                pending.clear()

        for child in el:
            if not isinstance(child.tag, str) or child.tag in ("COVER", "PGBRK", "IMAGE"):
                continue
            tag = child.tag
            if tag == "TITLE":
                flush()
                # A TITLE outside any SECTION (e.g. the 목 차 heading) names no section.
                titles = path_titles + [_text(child)] if el.tag.startswith("SECTION-") else path_titles
            elif tag.startswith("SECTION-"):
                flush()
                self._walk(child, titles)
            elif tag == "P":
                t = _text(child)
                if t and _UNIT_RE.match(t):
                    unit_note = t
                elif t:
                    pending.append(t)
            elif tag in ("TABLE", "TABLE-GROUP"):
                for tb in [child] if tag == "TABLE" else list(child.iter("TABLE")):
                    md = _table_md(tb)
                    if md:
                        flush()
                        self._add(titles, "table", (unit_note + "\n" if unit_note else "") + md)
                unit_note = ""
            else:
                self._walk(child, titles)
        flush()


@register_source("dart", patterns=("*.xml", "*.xhml"), langs=("ko",))
def load_dart(path: Path) -> Iterator[LoadedDoc | Quarantined]:
    try:
        text, encoding = decode_bytes(path.read_bytes(), ("utf-8", "cp949", "euc-kr"))
    except UnicodeDecodeError as exc:
        yield Quarantined("dart", str(path), None, None, f"unknown encoding: {exc}")
        return
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)
    # Real filings carry bare "&" ("R&D", "S&P") and "<" as text ("< TV 시장점유율 추이 >", "<보수현황>");
    # the recovering parser drops those, and after its first recovery also every later "&amp;".
    # dart3.xsd element names are ASCII, so a "<" not opening one is text.
    text = _BARE_LT.sub("&lt;", _BARE_AMP.sub("&amp;", text))
    try:
        root = lxml.etree.fromstring(text, lxml.etree.XMLParser(recover=True, huge_tree=True, resolve_entities=False))
    except lxml.etree.XMLSyntaxError as exc:
        yield Quarantined("dart", str(path), None, None, f"malformed XML: {exc}")
        return
    if root is None or root.tag != "DOCUMENT":
        yield Quarantined("dart", str(path), None, "DOCUMENT", "not a DART document (no DOCUMENT root)")
        return
    company_el = root.find("COMPANY-NAME")
    company = _text(company_el) if company_el is not None else ""
    corp_code = company_el.get("AREGCIK") if company_el is not None else None
    report_el = root.find("DOCUMENT-NAME")
    report = _text(report_el) if report_el is not None else "DART 공시"
    period_from = root.find(".//TU[@AUNIT='PERIODFROM']")
    period_to = root.find(".//TU[@AUNIT='PERIODTO']")
    period_end = period_to.get("AUNITVALUE") if period_to is not None else None
    if not company:
        yield Quarantined("dart", str(path), None, "COMPANY-NAME", "document has no company name")
        return
    doc_id = f"dart-{corp_code or path.stem}-{period_end or 'na'}-{report_el.get('ACODE') if report_el is not None else 'x'}"
    body = root.find("BODY")
    blocks = _BodyWalker(doc_id).blocks_of(body) if body is not None else []
    if not blocks:
        yield Quarantined("dart", str(path), None, "BODY", "document has no text")
        return
    if not re.search(r"</DOCUMENT>\s*$", text[-2000:]):
        yield Quarantined(
            "dart",
            str(path),
            doc_id,
            "file",
            "the file ends before </DOCUMENT> (truncated?): the document was loaded from the part that is there",
        )
    yield LoadedDoc(
        doc_id=doc_id,
        source="dart",
        institution=company,
        lang="ko",
        title=f"{company} {report}",
        doc_type=report,
        published=(f"{period_from.get('AUNITVALUE')}-{period_end}" if period_from is not None and period_end else period_end),
        source_path=f"{path} ({encoding})",
        blocks=blocks,
    )
