"""XBRL facts loader: SEC companyfacts JSON, SEC and DART XBRL instances -> `facts` rows.

Real fixtures are read in place through `conftest.fixtures_dir()`; synthetic inputs are written
to tmp_path.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from finhallu.schemas.contracts import CONTRACTS
from finhallu.sources import LoadedFacts, Quarantined, get_loader

SEC = Path("sec10k") / "xbrl"
DART = Path("dart") / "xbrl"
SNOW = SEC / "companyfacts_snow_facts.json"
LPA = SEC / "companyfacts_lpa_facts.json"
AAPL = SEC / "aapl_10k_2023_aapl-20230930_htm.xml"
SAMSUNG = DART / "00126380_2011-04-30.xbrl"
HANGUL = re.compile("[가-힣]")
COLUMNS = list(CONTRACTS["facts"].columns)


def load(path: Path) -> tuple[list[LoadedFacts], list[Quarantined]]:
    facts, quarantined = [], []
    for item in get_loader("xbrl").load(path):
        (quarantined if isinstance(item, Quarantined) else facts).append(item)
    return facts, quarantined


def rows_of(path: Path) -> list[dict]:
    facts, quarantined = load(path)
    assert not quarantined, quarantined[:3]
    assert len(facts) == 1
    return facts[0].rows


@pytest.fixture(scope="module")
def real_rows(real_data) -> dict[str, list[dict]]:
    return {name: rows_of(real_data / rel) for name, rel in {"snow": SNOW, "lpa": LPA, "aapl": AAPL, "samsung": SAMSUNG}.items()}


# --------------------------------------------------------------------------- contract


@pytest.mark.realdata
def test_all_fixture_facts_conform_and_pass_the_gate(real_rows):
    from finhallu.schemas.gate import run_gate

    rows = [r for rs in real_rows.values() for r in rs]
    for r in rows:
        assert list(r) == COLUMNS
    df = CONTRACTS["facts"].conform(pl.DataFrame(rows, infer_schema_length=None))
    assert df.height == len(rows) > 10_000
    assert df["fact_id"].n_unique() == df.height
    result = run_gate("facts", df, {})
    assert result.ok, result.failed[:3] or result.errored[:3]
    assert set(df["source"].unique()) == {"sec10k", "dart"}


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["snow", "lpa"])
def test_companyfacts_one_row_per_reported_value(real_data, real_rows, name):
    rows = real_rows[name]
    doc = json.loads((real_data / (SNOW if name == "snow" else LPA)).read_text())
    expected = sum(
        len(vals) for concepts in doc["facts"].values() for body in concepts.values() for vals in body["units"].values()
    )
    assert len(rows) == expected
    assert len({r["fact_id"] for r in rows}) == len(rows)
    assert {r["source"] for r in rows} == {"sec10k"}
    assert {r["entity_id"] for r in rows} == {str(int(doc["cik"]))}
    assert all(r["context_id"] is None and r["dimensions"] == "{}" and r["accession"] for r in rows)
    assert all(r["label"] for r in rows)
    assert all(r["instant"] == (r["period_start"] is None) for r in rows)


@pytest.mark.realdata
def test_snowflake_fy2024_revenue_matches_the_json(real_rows):
    [fact] = [
        r
        for r in real_rows["snow"]
        if r["concept"] == "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax"
        and r["accession"] == "0001640147-24-000101"
        and r["period_end"] == "2024-01-31"
    ]
    assert fact["value"] == "2806489000"
    assert fact["numeric_value"] == 2_806_489_000.0
    assert fact["unit"] == "USD"
    assert (fact["fiscal_year"], fact["fiscal_period"], fact["form"]) == (2024, "FY", "10-K")
    assert (fact["period_start"], fact["period_end"], fact["instant"]) == ("2023-02-01", "2024-01-31", False)
    assert fact["filed"] == "2024-03-26"
    assert fact["entity"] == "SNOWFLAKE INC."
    assert fact["label"] == "Revenue from Contract with Customer, Excluding Assessed Tax"


@pytest.mark.realdata
def test_lpa_ifrs_20f_facts_and_restated_values_kept_per_filing(real_rows):
    revenue = [r for r in real_rows["lpa"] if r["concept"] == "ifrs-full:Revenue" and r["period_end"] == "2023-12-31"]
    # FY2023 revenue is reported in the FY2023 20-F and again as the comparative in the FY2024 20-F.
    assert sorted(r["accession"] for r in revenue) == ["0001493152-24-016772", "0001997711-25-000030"]
    assert {r["value"] for r in revenue} == {"39436343"}
    assert {(r["form"], r["unit"], r["period_start"]) for r in revenue} == {("20-F", "USD", "2023-01-01")}
    assert {r["fiscal_year"] for r in revenue} == {2023, 2024}
    # companyfacts has no label for these IFRS concepts: one is derived from the concept name.
    assert revenue[0]["label"] == "Revenue" and revenue[0]["entity"] == "Logistic Properties of the Americas"


# --------------------------------------------------------------------------- SEC instance


@pytest.mark.realdata
def test_apple_instance_fy2023_revenue(real_rows):
    rows = real_rows["aapl"]
    [total] = [
        r
        for r in rows
        if r["concept"] == "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax"
        and r["period_start"] == "2022-09-25"
        and r["period_end"] == "2023-09-30"
        and r["dimensions"] == "{}"
    ]
    assert total["value"] == "383285000000" and total["numeric_value"] == 383_285_000_000.0
    assert (total["unit"], total["decimals"], total["context_id"]) == ("USD", "-6", "c-1")
    assert (total["entity"], total["entity_id"], total["source"]) == ("Apple Inc.", "320193", "sec10k")
    assert (total["fiscal_year"], total["fiscal_period"], total["form"]) == (2023, "FY", "10-K")
    # Segment breakdowns of the same concept carry their dimension.
    by_segment = [r for r in rows if r["concept"] == total["concept"] and r["dimensions"] != "{}"]
    assert by_segment
    assert all(json.loads(r["dimensions"]) for r in by_segment)


@pytest.mark.realdata
def test_apple_instance_units_text_facts_and_text_blocks(real_rows):
    rows = real_rows["aapl"]
    units = {r["unit"] for r in rows}
    assert {"USD", "shares", "USD/shares", "pure"} <= units
    eps = [
        r
        for r in rows
        if r["concept"] == "us-gaap:EarningsPerShareBasic" and r["dimensions"] == "{}" and r["period_end"] == "2023-09-30"
    ]
    assert eps and eps[0]["unit"] == "USD/shares" and eps[0]["value"] == "6.16"
    assert any(r["numeric_value"] is not None and r["numeric_value"] < 0 for r in rows)  # negative values survive
    name = [r for r in rows if r["concept"] == "dei:EntityRegistrantName"]
    assert name and name[0]["value"] == "Apple Inc." and name[0]["numeric_value"] is None and name[0]["unit"] is None
    assert not any(r["concept"].endswith("TextBlock") for r in rows)
    assert max(len(r["value"]) for r in rows) <= 2000
    # Instants have no start.
    cash = [r for r in rows if r["concept"] == "us-gaap:CashAndCashEquivalentsAtCarryingValue" and r["dimensions"] == "{}"]
    assert cash and all(r["instant"] and r["period_start"] is None for r in cash)


# --------------------------------------------------------------------------- DART instance


@pytest.mark.realdata
def test_dart_instance_korean_labels_and_consolidation(real_rows):
    rows = real_rows["samsung"]
    assert {r["source"] for r in rows} == {"dart"}
    assert {r["entity_id"] for r in rows} == {"00126380"}
    assert {r["entity"] for r in rows} == {"삼성전자"}
    assert {(r["fiscal_year"], r["fiscal_period"], r["form"]) for r in rows} == {(2021, "FY", "사업보고서")}
    korean = [r for r in rows if r["unit"] == "KRW" and ("매출" in r["label"] or "자산" in r["label"])]
    assert korean and all(r["label_en"] for r in korean)
    assert all(HANGUL.search(r["label"]) for r in rows if r["unit"] == "KRW")
    # A label from the filer's own -ko linkbase (an entity-specific concept).
    own = [r for r in rows if r["concept"].startswith("entity00126380:")]
    assert own and all(HANGUL.search(r["label"]) and r["label_en"] and not HANGUL.search(r["label_en"]) for r in own)

    revenue = {
        (json.loads(r["dimensions"])["ifrs-full:ConsolidatedAndSeparateFinancialStatementsAxis"], r["period_end"]): r
        for r in rows
        if r["concept"] == "ifrs-full:Revenue"
    }
    cons = revenue[("ifrs-full:ConsolidatedMember", "2021-12-31")]
    sep = revenue[("ifrs-full:SeparateMember", "2021-12-31")]
    assert cons["value"] == "279604799000000" and sep["value"] == "199744705000000"
    assert cons["context_id"].startswith("CFY2021dFY") and cons["period_start"] == "2021-01-01"
    assert cons["unit"] == "KRW" and cons["decimals"] == "-6" and cons["label"] == "수익(매출액)"
    assert {k[1] for k in revenue} == {"2019-12-31", "2020-12-31", "2021-12-31"}
    # Every money fact says whether it is consolidated or separate.
    assert all("ConsolidatedAndSeparateFinancialStatementsAxis" in r["dimensions"] for r in rows if r["unit"] == "KRW")


@pytest.mark.realdata
def test_dart_text_facts_keep_one_language(real_rows):
    rows = real_rows["samsung"]
    titles = [r["value"] for r in rows if r["concept"] == "dart-gcd:DocumentTitle"]
    assert titles == ["사업보고서"]


@pytest.mark.realdata
def test_auxiliary_and_non_facts_files_yield_nothing(real_data):
    loader = get_loader("xbrl")
    for rel in [
        SEC / "submissions_company_submission.json",
        SEC / "aapl_10k_2023_metadata.json",
        DART / "lab_00126380-ko_2011-04-30.xml",
        DART / "lab_00126380-en_2011-04-30.xml",
    ]:
        assert list(loader.load(real_data / rel)) == [], rel


@pytest.mark.realdata
def test_dart_instance_without_linkbases_falls_back(real_data, tmp_path):
    shutil.copy(real_data / SAMSUNG, tmp_path / SAMSUNG.name)
    rows = rows_of(tmp_path / SAMSUNG.name)
    own = [r for r in rows if r["concept"].startswith("entity00126380:")]
    assert own and all(r["label"] and r["label_en"] is None for r in own)
    revenue = [r for r in rows if r["concept"] == "ifrs-full:Revenue"]
    assert revenue and all(r["label"] == "수익(매출액)" and r["label_en"] == "Revenue" for r in revenue)


@pytest.mark.realdata
def test_fact_ids_do_not_depend_on_the_folder(real_data, tmp_path):
    shutil.copy(real_data / LPA, tmp_path / LPA.name)
    here = {r["fact_id"] for r in rows_of(real_data / LPA)}
    there = rows_of(tmp_path / LPA.name)
    assert {r["fact_id"] for r in there} == here
    assert all(r["source_path"] == str(tmp_path / LPA.name) for r in there)


# --------------------------------------------------------------------------- synthetic inputs

INSTANCE = """<?xml version="1.0" encoding="utf-8"?>
<xbrli:xbrl xmlns:xbrli="http://www.xbrl.org/2003/instance" xmlns:iso4217="http://www.xbrl.org/2003/iso4217"
  xmlns:xbrldi="http://xbrl.org/2006/xbrldi" xmlns:us-gaap="http://fasb.org/us-gaap/2023"
  xmlns:dei="http://xbrl.sec.gov/dei/2023" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <xbrli:context id="D2023">
    <xbrli:entity><xbrli:identifier scheme="http://www.sec.gov/CIK">0000012345</xbrli:identifier></xbrli:entity>
    <xbrli:period><xbrli:startDate>2023-01-01</xbrli:startDate><xbrli:endDate>2023-12-31</xbrli:endDate></xbrli:period>
  </xbrli:context>
  <xbrli:context id="I2023_seg">
    <xbrli:entity><xbrli:identifier scheme="http://www.sec.gov/CIK">0000012345</xbrli:identifier>
      <xbrli:segment><xbrldi:explicitMember dimension="us-gaap:StatementBusinessSegmentsAxis">us-gaap:CorporateMember</xbrldi:explicitMember></xbrli:segment>
    </xbrli:entity>
    <xbrli:period><xbrli:instant>2023-12-31</xbrli:instant></xbrli:period>
  </xbrli:context>
  <xbrli:unit id="usd"><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unit>
  <xbrli:unit id="eps"><xbrli:divide><xbrli:unitNumerator><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unitNumerator>
    <xbrli:unitDenominator><xbrli:measure>xbrli:shares</xbrli:measure></xbrli:unitDenominator></xbrli:divide></xbrli:unit>
  <dei:EntityRegistrantName contextRef="D2023">Example Corp</dei:EntityRegistrantName>
  <dei:DocumentType contextRef="D2023">10-K</dei:DocumentType>
  <dei:DocumentFiscalYearFocus contextRef="D2023">2023</dei:DocumentFiscalYearFocus>
  <dei:DocumentFiscalPeriodFocus contextRef="D2023">FY</dei:DocumentFiscalPeriodFocus>
  <us-gaap:Revenues contextRef="D2023" unitRef="usd" decimals="-3">1234000</us-gaap:Revenues>
  <us-gaap:NetIncomeLoss contextRef="D2023" unitRef="usd" decimals="-3">-5000</us-gaap:NetIncomeLoss>
  <us-gaap:EarningsPerShareBasic contextRef="D2023" unitRef="eps" decimals="2">0.12</us-gaap:EarningsPerShareBasic>
  <us-gaap:Assets contextRef="I2023_seg" unitRef="usd" decimals="-3">99000</us-gaap:Assets>
  <us-gaap:Liabilities contextRef="I2023_seg" unitRef="usd" xsi:nil="true"/>
  <us-gaap:SignificantAccountingPoliciesTextBlock contextRef="D2023">&lt;p&gt;Policies&lt;/p&gt;</us-gaap:SignificantAccountingPoliciesTextBlock>
  <us-gaap:Goodwill contextRef="MISSING" unitRef="usd" decimals="0">1</us-gaap:Goodwill>
</xbrli:xbrl>
"""


def test_synthetic_instance(tmp_path):
    p = tmp_path / "example-20231231.xml"
    p.write_text(INSTANCE)
    facts, quarantined = load(p)
    assert [q.field for q in quarantined] == ["contextRef"] and "MISSING" in quarantined[0].error
    rows = {r["concept"]: r for r in facts[0].rows}
    assert set(rows) == {
        "dei:EntityRegistrantName",
        "dei:DocumentType",
        "dei:DocumentFiscalYearFocus",
        "dei:DocumentFiscalPeriodFocus",
        "us-gaap:Revenues",
        "us-gaap:NetIncomeLoss",
        "us-gaap:EarningsPerShareBasic",
        "us-gaap:Assets",
    }
    rev = rows["us-gaap:Revenues"]
    assert (rev["entity"], rev["entity_id"], rev["form"], rev["fiscal_year"], rev["fiscal_period"]) == (
        "Example Corp",
        "12345",
        "10-K",
        2023,
        "FY",
    )
    assert (rev["value"], rev["numeric_value"], rev["unit"], rev["decimals"]) == ("1234000", 1234000.0, "USD", "-3")
    assert rows["us-gaap:NetIncomeLoss"]["numeric_value"] == -5000.0
    assert rows["us-gaap:EarningsPerShareBasic"]["unit"] == "USD/shares"
    assets = rows["us-gaap:Assets"]
    assert assets["instant"] and assets["period_start"] is None and assets["period_end"] == "2023-12-31"
    assert json.loads(assets["dimensions"]) == {"us-gaap:StatementBusinessSegmentsAxis": "us-gaap:CorporateMember"}
    assert rev["label"] == rev["label_en"] == "Revenues"
    df = CONTRACTS["facts"].conform(pl.DataFrame(facts[0].rows, infer_schema_length=None))
    assert df.height == 8


def test_synthetic_companyfacts_and_other_json(tmp_path):
    cf = {
        "cik": 42,
        "entityName": "Tiny Co",
        "facts": {
            "us-gaap": {
                "Revenues": {
                    "label": "Revenues",
                    "description": "",
                    "units": {
                        "USD": [
                            {
                                "start": "2023-01-01",
                                "end": "2023-12-31",
                                "val": 10,
                                "accn": "a-1",
                                "fy": 2023,
                                "fp": "FY",
                                "form": "10-K",
                                "filed": "2024-02-01",
                                "frame": "CY2023",
                            },
                            {
                                "start": "2023-01-01",
                                "end": "2023-12-31",
                                "val": 10,
                                "accn": "a-2",
                                "fy": 2024,
                                "fp": "FY",
                                "form": "10-K",
                                "filed": "2025-02-01",
                            },
                        ]
                    },
                },
                "EarningsPerShareBasic": {
                    "label": None,
                    "units": {
                        "USD/shares": [
                            {
                                "start": "2023-01-01",
                                "end": "2023-12-31",
                                "val": 1.25,
                                "accn": "a-1",
                                "fy": 2023,
                                "fp": "FY",
                                "form": "10-K",
                                "filed": "2024-02-01",
                            }
                        ]
                    },
                },
                "Broken": {"label": "x"},
            }
        },
    }
    (tmp_path / "companyfacts.json").write_text(json.dumps(cf))
    facts, quarantined = load(tmp_path / "companyfacts.json")
    assert [(q.record_id, q.field) for q in quarantined] == [("us-gaap:Broken", "units")]
    rows = facts[0].rows
    assert len(rows) == 3 and len({r["fact_id"] for r in rows}) == 3
    eps = [r for r in rows if r["unit"] == "USD/shares"][0]
    assert (eps["value"], eps["numeric_value"], eps["label"], eps["entity_id"]) == (
        "1.25",
        1.25,
        "Earnings per share basic",
        "42",
    )

    (tmp_path / "submissions.json").write_text(json.dumps({"cik": "42", "name": "Tiny Co", "filings": {"recent": {}}}))
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    assert list(get_loader("xbrl").load(tmp_path / "submissions.json")) == []
    assert list(get_loader("xbrl").load(tmp_path / "list.json")) == []


@pytest.mark.parametrize(
    "name, content",
    [
        ("bad.json", '{"cik": 1, "facts": {'),
        ("bad.xml", "<xbrl xmlns='http://www.xbrl.org/2003/instance'><context id='a'>"),
        ("bad.xbrl", b"\x00\xff\xfe not xml at all"),
        ("empty.json", ""),
    ],
)
def test_malformed_input_is_quarantined(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    facts, quarantined = load(p)
    assert facts == [] and len(quarantined) == 1
    q = quarantined[0]
    assert q.path == str(p) and q.error.startswith(("malformed JSON", "malformed XML"))


def test_other_xml_yields_nothing(tmp_path):
    p = tmp_path / "document.xml"
    p.write_bytes("<?xml version='1.0' encoding='utf-8'?><DOCUMENT><P>반기보고서</P></DOCUMENT>".encode("cp949"))
    assert list(get_loader("xbrl").load(p)) == []
    p.write_text("<?xml version='1.0'?><link:linkbase xmlns:link='http://www.xbrl.org/2003/linkbase'/>")
    assert list(get_loader("xbrl").load(p)) == []


def test_instance_without_facts_is_quarantined(tmp_path):
    p = tmp_path / "empty.xbrl"
    p.write_text("<xbrl xmlns='http://www.xbrl.org/2003/instance'/>")
    facts, quarantined = load(p)
    assert facts == [] and [q.field for q in quarantined] == ["facts"]
