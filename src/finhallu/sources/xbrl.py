"""XBRL facts: SEC companyfacts JSON and XBRL instance documents (SEC, DART) -> `facts` rows.

Each file is sniffed, whatever its extension:

* companyfacts JSON (`{"cik", "entityName", "facts": {taxonomy: {concept: {"label", "units": ...}}}}`)
  -> one row per reported value (source 'sec10k'). The same value reported again in a later
  filing is a row of its own: the accession tells them apart.
* any other well-formed JSON (EDGAR submissions, download metadata) is not facts data: nothing.
* an XBRL instance (root `xbrli:xbrl`) -> one row per fact with a context. Contexts give the
  period and explicit/typed dimensions (segment or scenario), units give 'USD', 'USD/shares'.
  Text facts are kept with a null numeric value unless they are narrative text blocks
  (`...TextBlock` concepts or over 2,000 characters). Document metadata (entity name, fiscal
  year and period, form) comes from dei facts (SEC) or dart-gcd facts (DART).
  DART instances (identifier scheme at dart.fss.or.kr) take labels from the label linkbases next
  to them (`lab_<corp>-ko_<date>.xml`, `lab_<corp>-en_<date>.xml`); SEC instances from `*_lab.xml`.
* label linkbases, schemas and other XML: auxiliary, nothing (a `.xml` whose first 8 KB never
  mention XBRL is not even parsed, so a DART document.xml in the same tree is not quarantined).
* unreadable input: Quarantined, naming the file and what failed.

fact_id hashes the file *name* (not its location), the context (the accession for companyfacts),
concept, unit, value and period, so ids do not change when the data folder moves.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import lxml.etree

from finhallu.sources import LoadedFacts, Quarantined, register_source

XBRLI = "http://www.xbrl.org/2003/instance"
LINK = "http://www.xbrl.org/2003/linkbase"
XLINK = "http://www.w3.org/1999/xlink"
XBRLDI = "http://xbrl.org/2006/xbrldi"
XSI_NIL = "{http://www.w3.org/2001/XMLSchema-instance}nil"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

MAX_TEXT_CHARS = 2000
_STANDARD_LABEL = "http://www.xbrl.org/2003/role/label"
# Label roles in order of preference; documentation and period-start/end labels are not names.
_ROLE_RANK = {
    _STANDARD_LABEL: 0,
    "http://www.xbrl.org/2003/role/terseLabel": 1,
    "http://dart.fss.or.kr/role/2019-10-01/ifrs/dart_label": 2,
    "http://www.xbrl.org/2003/role/verboseLabel": 3,
    "http://www.xbrl.org/2003/role/totalLabel": 4,
    "http://www.xbrl.org/2009/role/netLabel": 5,
}
_SKIP_ROLES = ("documentation", "definitionGuidance", "periodStart", "periodEnd", "negated")

# Korean labels for common K-IFRS/DART line items, used where the filer's -ko label linkbase has
# none: a filer ships only the labels it overrides or adds, not the DART taxonomy's own.
# (Standard Korean accounting terms as DART shows them; the filer's linkbase always wins.)
DART_KO_LABELS = {
    "ifrs-full:Revenue": "수익(매출액)",
    "ifrs-full:CostOfSales": "매출원가",
    "ifrs-full:GrossProfit": "매출총이익",
    "dart:OperatingIncomeLoss": "영업이익(손실)",
    "ifrs-full:ProfitLossBeforeTax": "법인세비용차감전순이익(손실)",
    "ifrs-full:IncomeTaxExpenseContinuingOperations": "법인세비용",
    "ifrs-full:ProfitLoss": "당기순이익(손실)",
    "ifrs-full:ProfitLossFromContinuingOperations": "계속영업이익(손실)",
    "ifrs-full:ProfitLossAttributableToOwnersOfParent": "지배기업의 소유주에게 귀속되는 당기순이익(손실)",
    "ifrs-full:ProfitLossAttributableToNoncontrollingInterests": "비지배지분에 귀속되는 당기순이익(손실)",
    "ifrs-full:BasicEarningsLossPerShare": "기본주당이익(손실)",
    "ifrs-full:DilutedEarningsLossPerShare": "희석주당이익(손실)",
    "ifrs-full:OtherComprehensiveIncome": "기타포괄손익",
    "ifrs-full:ComprehensiveIncome": "총포괄손익",
    "ifrs-full:Assets": "자산총계",
    "ifrs-full:CurrentAssets": "유동자산",
    "ifrs-full:NoncurrentAssets": "비유동자산",
    "ifrs-full:CashAndCashEquivalents": "현금및현금성자산",
    "ifrs-full:Inventories": "재고자산",
    "ifrs-full:PropertyPlantAndEquipment": "유형자산",
    "ifrs-full:IntangibleAssetsOtherThanGoodwill": "무형자산",
    "ifrs-full:Liabilities": "부채총계",
    "ifrs-full:CurrentLiabilities": "유동부채",
    "ifrs-full:NoncurrentLiabilities": "비유동부채",
    "ifrs-full:ShorttermBorrowings": "단기차입금",
    "ifrs-full:Equity": "자본총계",
    "ifrs-full:EquityAndLiabilities": "자본과부채총계",
    "ifrs-full:IssuedCapital": "자본금",
    "ifrs-full:SharePremium": "주식발행초과금",
    "ifrs-full:RetainedEarnings": "이익잉여금(결손금)",
    "ifrs-full:NoncontrollingInterests": "비지배지분",
    "ifrs-full:DividendsPaid": "배당금지급",
    "ifrs-full:CashFlowsFromUsedInOperatingActivities": "영업활동현금흐름",
    "ifrs-full:CashFlowsFromUsedInInvestingActivities": "투자활동현금흐름",
    "ifrs-full:CashFlowsFromUsedInFinancingActivities": "재무활동현금흐름",
    "ifrs-full:FinanceIncome": "금융수익",
    "ifrs-full:FinanceCosts": "금융원가",
    "ifrs-full:DeferredTaxAssets": "이연법인세자산",
    "ifrs-full:DeferredTaxLiabilities": "이연법인세부채",
    "ifrs-full:CurrentTaxLiabilities": "당기법인세부채",
    "ifrs-full:TradeAndOtherCurrentReceivables": "매출채권 및 기타유동채권",
    "ifrs-full:PurchaseOfPropertyPlantAndEquipmentClassifiedAsInvestingActivities": "유형자산의 취득",
    "ifrs-full:ProceedsFromSalesOfPropertyPlantAndEquipmentClassifiedAsInvestingActivities": "유형자산의 처분",
    "ifrs-full:PurchaseOfIntangibleAssetsClassifiedAsInvestingActivities": "무형자산의 취득",
    "ifrs-full:ProceedsFromSalesOfIntangibleAssetsClassifiedAsInvestingActivities": "무형자산의 처분",
    "ifrs-full:InterestPaidClassifiedAsOperatingActivities": "이자의 지급",
    "ifrs-full:InterestReceivedClassifiedAsOperatingActivities": "이자의 수취",
    "ifrs-full:IncomeTaxesPaidRefundClassifiedAsOperatingActivities": "법인세 납부액",
    "ifrs-full:DividendsPaidClassifiedAsFinancingActivities": "배당금의 지급",
    "dart:ShortTermTradeReceivable": "매출채권",
    "dart:ShortTermDepositsNotClassifiedAsCashEquivalents": "단기금융상품",
    "dart:TotalSellingGeneralAdministrativeExpenses": "판매비와관리비",
    "dart:OtherCurrentAssets": "기타유동자산",
    "dart:OtherNonCurrentAssets": "기타비유동자산",
    "dart:OtherCurrentLiabilities": "기타유동부채",
    "dart:OtherNonCurrentLiabilities": "기타비유동부채",
    "dart:BondsIssued": "사채",
    "dart:LongTermBorrowingsGross": "장기차입금",
    "dart:LongTermOtherPayablesGross": "장기미지급금",
    "dart:IssuedCapitalOfCommonStock": "보통주자본금",
    "dart:IssuedCapitalOfPreferredStock": "우선주자본금",
    "dart:EquityAtBeginningOfPeriod": "기초자본",
    "dart:PurchaseOfLongTermFinancialInstruments": "장기금융상품의 취득",
    "dart:ProceedsFromSalesOfLongTermFinancialInstruments": "장기금융상품의 처분",
}
DART_FORM_PERIOD = {"사업보고서": "FY", "반기보고서": "Q2"}
_DART_CONTEXT = re.compile(r"^C(?:FY)?(\d{4})[de](FY|Q[1-4])(?:_|$)")
_STANDARD_PREFIXES = ("us-gaap", "ifrs-full", "ifrs", "dei", "srt", "dart", "dart-gcd", "ecd", "country", "invest")


# --------------------------------------------------------------------------- shared helpers


def fact_id(
    path: Path, context: str | None, concept: str, unit: str | None, value: str, start: str | None, end: str | None
) -> str:
    key = "|".join([path.name, context or "", concept, unit or "", value, f"{start or ''}..{end or ''}"])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def humanize(concept: str) -> str:
    """'us-gaap:RevenueFromContractWithCustomer' -> 'Revenue from contract with customer'."""
    name = concept.split(":", 1)[-1]
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name).replace("_", " ").split()
    out = [w if (w.isupper() and len(w) > 1) or i == 0 else w.lower() for i, w in enumerate(words)]
    return " ".join(out)


def _is_standard(concept: str) -> bool:
    return concept.split(":", 1)[0] in _STANDARD_PREFIXES


def _row(**kw) -> dict:
    return {
        "fact_id": kw["fact_id"],
        "source": kw["source"],
        "entity": kw.get("entity"),
        "entity_id": kw.get("entity_id"),
        "concept": kw["concept"],
        "label": kw.get("label"),
        "label_en": kw.get("label_en"),
        "value": kw["value"],
        "numeric_value": kw.get("numeric_value"),
        "unit": kw.get("unit"),
        "decimals": kw.get("decimals"),
        "period_start": kw.get("period_start"),
        "period_end": kw["period_end"],
        "instant": kw["period_start"] is None,
        "fiscal_year": kw.get("fiscal_year"),
        "fiscal_period": kw.get("fiscal_period"),
        "form": kw.get("form"),
        "filed": kw.get("filed"),
        "accession": kw.get("accession"),
        "context_id": kw.get("context_id"),
        "dimensions": kw.get("dimensions") or "{}",
        "source_path": kw["source_path"],
    }


def _int_or_none(v) -> int | None:
    try:
        return int(str(v).strip()[:4]) if v is not None and str(v).strip() else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- entry point


@register_source("xbrl", patterns=("*.json", "*.xml", "*.xbrl"))
def load_xbrl(path: Path) -> Iterator[LoadedFacts | Quarantined]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        yield Quarantined("sec10k", str(path), None, None, f"cannot read file: {exc}")
        return
    head = data[:512].lstrip(b"\xef\xbb\xbf \t\r\n")
    if path.suffix.lower() == ".json" or head[:1] in (b"{", b"["):
        yield from _load_json(path, data)
    elif path.suffix.lower() == ".xml" and b"xbrl" not in data[:8192].lower():
        return  # XML that never mentions XBRL (a DART document.xml, say): not facts data, not our problem
    else:
        yield from _load_xml(path, data)


# --------------------------------------------------------------------------- companyfacts JSON


def _load_json(path: Path, data: bytes) -> Iterator[LoadedFacts | Quarantined]:
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        yield Quarantined("sec10k", str(path), None, None, f"malformed JSON: {exc}")
        return
    if not (isinstance(doc, dict) and isinstance(doc.get("facts"), dict) and ("cik" in doc or "entityName" in doc)):
        return  # submissions JSON, download metadata ...: not facts data
    entity = doc.get("entityName")
    entity_id = str(doc.get("cik") or "").strip().lstrip("0") or None
    rows: dict[str, dict] = {}
    for taxonomy, concepts in doc["facts"].items():
        if not isinstance(concepts, dict):
            yield Quarantined("sec10k", str(path), f"facts.{taxonomy}", taxonomy, "taxonomy is not an object of concepts")
            continue
        for name, body in concepts.items():
            concept = f"{taxonomy}:{name}"
            units = body.get("units") if isinstance(body, dict) else None
            if not isinstance(units, dict):
                yield Quarantined("sec10k", str(path), concept, "units", "concept has no `units` object")
                continue
            label = body.get("label") or humanize(concept)
            for unit, values in units.items():
                if not isinstance(values, list):
                    yield Quarantined("sec10k", str(path), f"{concept} [{unit}]", "units", "unit values are not a list")
                    continue
                for i, v in enumerate(values):
                    val = v.get("val") if isinstance(v, dict) else None
                    end = v.get("end") if isinstance(v, dict) else None
                    if val is None or isinstance(val, bool) or not end:
                        field = "end" if isinstance(v, dict) and val is not None else "val"
                        yield Quarantined(
                            "sec10k", str(path), f"{concept} [{unit}] #{i}", field, "fact without a value or end date"
                        )
                        continue
                    value = str(val) if not isinstance(val, float) else repr(val)
                    numeric = float(val) if isinstance(val, (int, float)) else None
                    start = v.get("start") or None
                    accn = v.get("accn")
                    fid = fact_id(path, accn, concept, unit, value, start, end)
                    rows.setdefault(
                        fid,
                        _row(
                            fact_id=fid,
                            source="sec10k",
                            entity=entity,
                            entity_id=entity_id,
                            concept=concept,
                            label=label,
                            label_en=label,
                            value=value,
                            numeric_value=numeric,
                            unit=unit,
                            decimals=None,
                            period_start=start,
                            period_end=end,
                            fiscal_year=_int_or_none(v.get("fy")),
                            fiscal_period=v.get("fp"),
                            form=v.get("form"),
                            filed=v.get("filed"),
                            accession=accn,
                            context_id=None,
                            dimensions="{}",
                            source_path=str(path),
                        ),
                    )
    yield LoadedFacts("sec10k", str(path), list(rows.values()))


# --------------------------------------------------------------------------- XBRL instances


def _load_xml(path: Path, data: bytes) -> Iterator[LoadedFacts | Quarantined]:
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, remove_comments=True)
    try:
        root = lxml.etree.fromstring(data, parser)
    except lxml.etree.XMLSyntaxError as exc:
        yield Quarantined(_guess_source(path), str(path), None, None, f"malformed XML: {exc}")
        return
    if root.tag != f"{{{XBRLI}}}xbrl":
        return  # label/presentation linkbases, schemas, other XML: auxiliary, not facts
    yield from _load_instance(path, root)


def _guess_source(path: Path) -> str:
    return "dart" if re.match(r"^\d{8}_", path.name) or "dart" in path.as_posix().lower() else "sec10k"


def _unit_string(unit_el) -> str:
    def measures(parent) -> str:
        ms = [_measure(m.text) for m in parent.iter(f"{{{XBRLI}}}measure")]
        return "*".join(ms)

    divide = unit_el.find(f"{{{XBRLI}}}divide")
    if divide is not None:
        num = divide.find(f"{{{XBRLI}}}unitNumerator")
        den = divide.find(f"{{{XBRLI}}}unitDenominator")
        return f"{measures(num) if num is not None else ''}/{measures(den) if den is not None else ''}"
    return measures(unit_el)


def _measure(text: str | None) -> str:
    """'iso4217:USD' -> 'USD', 'xbrli:shares' -> 'shares', 'aapl:Customer' -> 'Customer'."""
    return (text or "").strip().split(":")[-1]


def _contexts(root) -> dict[str, dict]:
    out = {}
    for ctx in root.iterchildren(f"{{{XBRLI}}}context"):
        cid = ctx.get("id")
        ident = ctx.find(f"{{{XBRLI}}}entity/{{{XBRLI}}}identifier")
        period = ctx.find(f"{{{XBRLI}}}period")
        start = end = None
        if period is not None:
            instant = period.findtext(f"{{{XBRLI}}}instant")
            if instant:
                end = instant.strip()[:10]
            else:
                start = (period.findtext(f"{{{XBRLI}}}startDate") or "").strip()[:10] or None
                end = (period.findtext(f"{{{XBRLI}}}endDate") or "").strip()[:10] or None
        dims: dict[str, str] = {}
        for holder in (f"{{{XBRLI}}}entity/{{{XBRLI}}}segment", f"{{{XBRLI}}}scenario"):
            for h in ctx.findall(holder):
                for m in h:
                    if not isinstance(m.tag, str):
                        continue
                    if m.tag == f"{{{XBRLDI}}}explicitMember":
                        dims[m.get("dimension")] = (m.text or "").strip()
                    elif m.tag == f"{{{XBRLDI}}}typedMember":
                        dims[m.get("dimension")] = re.sub(r"\s+", " ", "".join(m.itertext())).strip()
        out[cid] = {
            "scheme": ident.get("scheme") if ident is not None else None,
            "identifier": (ident.text or "").strip() if ident is not None else None,
            "start": start,
            "end": end,
            "dims": dims,
        }
    return out


def _concept(el, uri_prefix: dict[str, str]) -> str:
    qn = lxml.etree.QName(el)
    prefix = el.prefix or uri_prefix.get(qn.namespace) or qn.namespace or ""
    return f"{prefix}:{qn.localname}"


def _iter_facts(parent):
    """Top-level facts and facts nested in tuples (elements without contextRef that have children)."""
    for el in parent:
        if not isinstance(el.tag, str):
            continue
        ns = lxml.etree.QName(el).namespace
        if ns in (XBRLI, LINK):
            continue
        if el.get("contextRef") is not None:
            yield el
        elif len(el):
            yield from _iter_facts(el)


# A fact element as read: (element, concept, context id, language of a text fact or "").
_RawFact = tuple[Any, str, str, str]


class _BadFact(ValueError):
    """One field of one instance fact cannot be read; the fact is quarantined naming it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _load_instance(path: Path, root) -> Iterator[LoadedFacts | Quarantined]:
    uri_prefix = {uri: p for p, uri in root.nsmap.items() if p}
    contexts = _contexts(root)
    units = {u.get("id"): _unit_string(u) for u in root.iterchildren(f"{{{XBRLI}}}unit")}
    schemes = {c["scheme"] or "" for c in contexts.values()}
    source = "dart" if any("dart.fss.or.kr" in s for s in schemes) else "sec10k"
    pref_lang = "ko" if source == "dart" else "en"

    raw = _raw_facts(root, uri_prefix)
    if not raw:
        yield Quarantined(source, str(path), None, "facts", "XBRL instance without facts")
        return
    langs = _fact_languages(raw)
    meta = _document_meta(raw, contexts, source, pref_lang, langs)
    ko_labels, en_labels = _labels_for(path, tuple(sorted(set(uri_prefix))))
    rows: dict[str, dict] = {}
    for el, concept, cid, lang in raw:
        # DART repeats text facts per language; the table has no language column: keep the filer's own.
        if lang and lang != pref_lang and pref_lang in langs.get((concept, cid), ()):
            continue
        try:
            ctx = _fact_context(contexts, cid)
            read = _fact_value(el, concept, units)
        except _BadFact as exc:
            yield Quarantined(source, str(path), f"{concept}@{cid}", exc.field, str(exc))
            continue
        if read is None:
            continue  # a narrative text block
        value, numeric, unit = read
        label, label_en = _fact_labels(concept, source, ko_labels, en_labels)
        fid = fact_id(path, cid, concept, unit, value, ctx["start"], ctx["end"])
        rows.setdefault(
            fid,
            _row(
                fact_id=fid,
                source=source,
                entity=meta["entity"],
                entity_id=meta["entity_id"] or _entity_id(ctx, source),
                concept=concept,
                label=label,
                label_en=label_en,
                value=value,
                numeric_value=numeric,
                unit=unit,
                decimals=el.get("decimals"),
                period_start=ctx["start"],
                period_end=ctx["end"],
                fiscal_year=meta["fiscal_year"],
                fiscal_period=meta["fiscal_period"],
                form=meta["form"],
                filed=None,
                accession=None,
                context_id=cid,
                dimensions=json.dumps(ctx["dims"], ensure_ascii=False, sort_keys=True),
                source_path=str(path),
            ),
        )
    yield LoadedFacts(source, str(path), list(rows.values()))


def _raw_facts(root, uri_prefix: dict[str, str]) -> list[_RawFact]:
    """The instance's facts in document order, nil facts left out."""
    raw = []
    for el in _iter_facts(root):
        if el.get(XSI_NIL) in ("true", "1"):
            continue
        raw.append((el, _concept(el, uri_prefix), el.get("contextRef"), (el.get(XML_LANG) or "").split("-")[0].lower()))
    return raw


def _fact_languages(raw: list[_RawFact]) -> dict[tuple[str, str], set[str]]:
    """The languages each (concept, context) states text in."""
    langs: dict[tuple[str, str], set[str]] = {}
    for _, concept, cid, lang in raw:
        if lang:
            langs.setdefault((concept, cid), set()).add(lang)
    return langs


def _fact_context(contexts: dict[str, dict], cid: str) -> dict:
    """The fact's context; it must be defined and have a period end (an instant or an end date)."""
    ctx = contexts.get(cid)
    if ctx is None:
        raise _BadFact("contextRef", f"context {cid!r} is not defined")
    if not ctx["end"]:
        raise _BadFact("period", "context has no instant or end date (forever)")
    return ctx


def _fact_value(el, concept: str, units: dict[str, str]) -> tuple[str, float | None, str | None] | None:
    """(value, numeric value, unit) of a fact; None for a narrative text block, which is not kept."""
    unit_ref = el.get("unitRef")
    value = "".join(el.itertext()).strip()
    if unit_ref is None:
        if concept.endswith("TextBlock") or len(value) > MAX_TEXT_CHARS:
            return None
        return re.sub(r"\s+", " ", value), None, None
    unit = units.get(unit_ref)
    if unit is None:
        raise _BadFact("unitRef", f"unit {unit_ref!r} is not defined")
    try:
        numeric = float(value.replace(",", ""))
    except ValueError:
        raise _BadFact("value", f"numeric fact is not a number: {value[:40]!r}") from None
    if el.get("sign") == "-":  # inline-XBRL style sign attribute
        numeric = -numeric
        value = value if value.startswith("-") else f"-{value}"
    if numeric == 0.0:
        numeric = 0.0  # no negative zero
    return value, numeric, unit


def _fact_labels(concept: str, source: str, ko_labels: dict[str, str], en_labels: dict[str, str]) -> tuple[str, str | None]:
    """(label, English label): the filer's linkbase labels first, then DART's Korean names
    (DART) or the concept's name in words (standard concepts; any concept for `label`)."""
    if source == "dart":
        label = ko_labels.get(concept) or DART_KO_LABELS.get(concept)
    else:
        label = None
    label_en = en_labels.get(concept) or (humanize(concept) if _is_standard(concept) else None)
    label = label or label_en or humanize(concept)
    if source == "sec10k":
        label_en = label_en or label
    return label, label_en


def _entity_id(ctx: dict, source: str) -> str | None:
    ident = ctx.get("identifier")
    if not ident:
        return None
    return ident if source == "dart" else (ident.lstrip("0") or ident)


def _document_meta(raw, contexts, source: str, pref_lang: str, langs) -> dict:
    """Entity, fiscal year/period and form from dei (SEC) or dart-gcd (DART) facts."""
    found: dict[str, list[tuple[int, str]]] = {}
    wanted = {
        "EntityRegistrantName",
        "EntityCentralIndexKey",
        "DocumentFiscalYearFocus",
        "DocumentFiscalPeriodFocus",
        "DocumentType",
        "DocumentTitle",
        "DocumentPeriodEndDate",
    }
    for el, concept, cid, lang in raw:
        prefix, _, local = concept.partition(":")
        if local not in wanted or not (prefix.startswith("dei") or prefix.startswith("dart-gcd")):
            continue
        ctx = contexts.get(cid) or {"dims": {}}
        # Prefer facts without dimensions, then the current-period member, then the preferred language.
        dims = ctx["dims"]
        rank = (0 if not dims else 1 if any("Current" in m for m in dims.values()) else 2) * 2
        rank += 0 if (not lang or lang == pref_lang) else 1
        found.setdefault(local, []).append((rank, "".join(el.itertext()).strip()))
    get = {k: min(v)[1] for k, v in found.items() if v}
    entity_id = get.get("EntityCentralIndexKey")
    if entity_id and source == "sec10k":
        entity_id = entity_id.lstrip("0") or entity_id
    if not entity_id:
        idents = [c["identifier"] for c in contexts.values() if c.get("identifier")]
        if idents:
            entity_id = idents[0] if source == "dart" else (idents[0].lstrip("0") or idents[0])
    fy = _int_or_none(get.get("DocumentFiscalYearFocus"))
    fp = get.get("DocumentFiscalPeriodFocus")
    form = get.get("DocumentType") or get.get("DocumentTitle")
    if source == "dart":
        for cid in contexts:
            m = _DART_CONTEXT.match(cid)
            if m:
                fy = fy or int(m.group(1))
                fp = fp or m.group(2)
                break
        fp = fp or DART_FORM_PERIOD.get(form or "")
    if fy is None and get.get("DocumentPeriodEndDate"):
        fy = _int_or_none(get["DocumentPeriodEndDate"])
    return {
        "entity": get.get("EntityRegistrantName") or entity_id,
        "entity_id": entity_id,
        "fiscal_year": fy,
        "fiscal_period": fp or None,
        "form": form,
    }


# --------------------------------------------------------------------------- label linkbases


def _linkbase_key(name: str) -> str:
    stem = name.rsplit(".", 1)[0]
    stem = re.sub(r"^lab_", "", stem)
    stem = re.sub(r"_lab$", "", stem)
    return re.sub(r"-(ko|en|kor|eng)(?=_|$)", "", stem)


def _label_files(instance: Path) -> list[Path]:
    folder = instance.parent
    files = sorted({*folder.glob("lab_*.xml"), *folder.glob("*_lab.xml")})
    stem = re.sub(r"_htm$", "", instance.stem)
    matched = [f for f in files if (k := _linkbase_key(f.name)) and (stem == k or stem.endswith(k))]
    return matched or files


def _labels_for(instance: Path, prefixes: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    ko: dict[str, tuple[int, str]] = {}
    en: dict[str, tuple[int, str]] = {}
    for f in _label_files(instance):
        try:
            stat = f.stat()
            labels = _parse_label_linkbase(str(f), stat.st_mtime_ns, stat.st_size, prefixes)
        except (OSError, lxml.etree.XMLSyntaxError):
            continue  # a broken auxiliary linkbase costs labels, not facts
        for concept, lang, rank, text in labels:
            target = ko if lang == "ko" else en if lang == "en" else None
            if target is not None and (concept not in target or rank < target[concept][0]):
                target[concept] = (rank, text)
    return {k: v[1] for k, v in ko.items()}, {k: v[1] for k, v in en.items()}


@lru_cache(maxsize=32)
def _parse_label_linkbase(path: str, _mtime: int, _size: int, prefixes: tuple[str, ...]) -> tuple:
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    root = lxml.etree.parse(path, parser).getroot()
    if root.tag != f"{{{LINK}}}linkbase":
        return ()
    file_lang = (
        "ko" if re.search(r"-ko(?:_|\.|$)", Path(path).name) else "en" if re.search(r"-en(?:_|\.|$)", Path(path).name) else ""
    )
    href, lab = f"{{{XLINK}}}href", f"{{{XLINK}}}label"
    out = []
    for link in root.iter(f"{{{LINK}}}labelLink"):
        locs: dict[str, str] = {}
        resources: dict[str, list[tuple[str, int, str]]] = {}
        arcs: list[tuple[str, str]] = []
        for el in link:
            if el.tag == f"{{{LINK}}}loc":
                frag = (el.get(href) or "").rpartition("#")[2]
                if frag:
                    locs[el.get(lab)] = _fragment_concept(frag, prefixes)
            elif el.tag == f"{{{LINK}}}label":
                role = el.get(f"{{{XLINK}}}role") or _STANDARD_LABEL
                if any(s in role for s in _SKIP_ROLES):
                    continue
                text = re.sub(r"\s+", " ", "".join(el.itertext())).strip()
                lang = (el.get(XML_LANG) or file_lang).split("-")[0].lower()
                if text:
                    resources.setdefault(el.get(lab), []).append((lang, _ROLE_RANK.get(role, 9), text))
            elif el.tag == f"{{{LINK}}}labelArc":
                arcs.append((el.get(f"{{{XLINK}}}from"), el.get(f"{{{XLINK}}}to")))
        for frm, to in arcs:
            concept = locs.get(frm)
            if concept:
                for lang, rank, text in resources.get(to, ()):
                    out.append((concept, lang, rank, text))
    return tuple(out)


def _fragment_concept(frag: str, prefixes: tuple[str, ...]) -> str:
    """Schema element id -> QName: 'ifrs-full_Revenue' -> 'ifrs-full:Revenue' (ids are prefix_Name)."""
    best = max((p for p in prefixes if frag.startswith(p + "_")), key=len, default=None)
    if best:
        return f"{best}:{frag[len(best) + 1 :]}"
    prefix, _, local = frag.partition("_")
    return f"{prefix}:{local}" if local else frag
