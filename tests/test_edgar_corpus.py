"""EDGAR-CORPUS item-split 10-K JSON -> documents with one block run per Item.

Real fixtures are read in place through the `real_data` fixture (copied into tmp_path only
where a test needs to change the folder around them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from finhallu.sources import LoadedDoc, Quarantined, get_loader
from finhallu.sources.edgar_corpus import clean_company, item_title, paragraphs
from finhallu.sources.sec10k import ITEM_ORDER

CORPUS = Path("sec10k") / "edgar-corpus"
DISNEY = "1001039_10K_2013_0001001039-13-000164.json"
HHCA = "1000685_10K_1997_0000950109-97-006109.json"
PERICOM = "1001426_10K_2007_0001193125-07-204517.json"
MDNA = "Item 7. Management's Discussion and Analysis of Financial Condition and Results of Operations"


def load(path: Path) -> tuple[list[LoadedDoc], list[Quarantined]]:
    docs, quarantined = [], []
    for item in get_loader("edgar_corpus").load(path):
        (quarantined if isinstance(item, Quarantined) else docs).append(item)
    return docs, quarantined


def one_doc(path: Path) -> LoadedDoc:
    docs, quarantined = load(path)
    assert not quarantined, quarantined
    assert len(docs) == 1
    return docs[0]


def sections(doc: LoadedDoc) -> dict[str, str]:
    out: dict[str, str] = {}
    for b in doc.blocks:
        out[b.section_path] = (out.get(b.section_path, "") + "\n" + b.text).strip()
    return out


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name, cik, year, company",
    [
        (DISNEY, "1001039", 2013, "WALT DISNEY CO"),
        (HHCA, "1000685", 1997, "HOME HEALTH CORP OF AMERICA INC"),
        (PERICOM, "1001426", 2007, "PERICOM SEMICONDUCTOR CORP"),
    ],
)
def test_fixture_filings_load(real_data, name, cik, year, company):
    path = real_data / CORPUS / name
    raw = json.loads(path.read_text())
    doc = one_doc(path)
    assert doc.doc_id == f"sec10k-{cik}-{year}"
    assert (doc.source, doc.lang, doc.doc_type, doc.institution) == ("sec10k", "en", "10-K", company)
    assert doc.published == raw["period_of_report"]
    assert doc.source_path == str(path)
    assert {b.kind for b in doc.blocks} == {"text"}
    assert len({b.block_id for b in doc.blocks}) == len(doc.blocks)
    assert all(b.text.strip() and b.text == b.text.strip() for b in doc.blocks)
    # Items in the form's order, each exactly the non-empty items of the JSON.
    items = [s.split(".")[0].removeprefix("Item ") for s in dict.fromkeys(b.section_path for b in doc.blocks)]
    assert items == sorted(items, key=ITEM_ORDER.index)
    non_empty = [k.removeprefix("item_").upper() for k, v in raw.items() if k.startswith("item_") and v.strip()]
    assert set(items) == set(non_empty)
    # The item's own heading line is in the section path, not in the text.
    first = next(b for b in doc.blocks if b.section_path == MDNA)
    assert not first.text.upper().startswith("ITEM 7")


@pytest.mark.realdata
def test_disney_2013_mdna_and_empty_items(real_data):
    doc = one_doc(real_data / CORPUS / DISNEY)
    text = sections(doc)
    assert len(text[MDNA]) > 50_000
    assert "Revenues for fiscal 2013 increased 7%, or $2.8 billion, to $45.0 billion" in text[MDNA]
    # item_9C and item_16 are empty strings in the JSON: no section at all.
    assert not any(s.startswith(("Item 9C.", "Item 16.")) for s in text)
    assert text["Item 9B. Other Information"] == "None."  # the trailing "PART III" leak is gone
    assert "Item 4. Mine Safety Disclosures" in text
    # A bullet alone on its line is joined to its text.
    assert any(b.text == "• Consolidated Results" for b in doc.blocks)
    assert not any(b.text == "•" for b in doc.blocks)


@pytest.mark.realdata
def test_1997_filing_uses_the_titles_of_its_time(real_data):
    doc = one_doc(real_data / CORPUS / HHCA)
    text = sections(doc)
    assert "Item 14. Exhibits, Financial Statement Schedules, and Reports on Form 8-K" in text
    assert "Item 4. Submission of Matters to a Vote of Security Holders" in text
    assert not any(s.startswith("Item 1A.") for s in text)  # absent before 2005
    # A sentence cut by a page break in the source is one paragraph again.
    assert any(b.text.endswith("cross- selling of these services to the Company's nursing patients.") for b in doc.blocks)


@pytest.mark.realdata
def test_institution_comes_from_the_metadata_csv(real_data, tmp_path):
    raw = json.loads((real_data / CORPUS / DISNEY).read_text())
    raw.pop("company")
    (tmp_path / DISNEY).write_text(json.dumps(raw))
    assert one_doc(tmp_path / DISNEY).institution == "CIK 1001039"  # no CSV, no company field
    shutil.copy(real_data / CORPUS / "FILINGS_METADATA_TEST.csv", tmp_path)
    assert one_doc(tmp_path / DISNEY).institution == "WALT DISNEY CO"
    # Matched by CIK when the file name is not in the CSV.
    raw["filename"] = "1001039_10K_2099_0000000000-99-000000.htm"
    (tmp_path / "renamed.json").write_text(json.dumps(raw))
    assert one_doc(tmp_path / "renamed.json").institution == "WALT DISNEY CO"


@pytest.mark.realdata
def test_metadata_csv_is_not_a_document(real_data):
    loader = get_loader("edgar_corpus")
    found = sorted(p.name for pattern in loader.patterns for p in (real_data / CORPUS).glob(pattern))
    assert found == sorted([DISNEY, HHCA, PERICOM])


# --------------------------------------------------------------------------- synthetic inputs

HARD_WRAPPED = """ITEM 7.  MANAGEMENT'S DISCUSSION AND ANALYSIS OF FINANCIAL CONDITION AND
RESULTS OF OPERATIONS

     Net sales increased 12% to $45.2 million in fiscal 1996 from $40.4
million in fiscal 1995, primarily as a result of higher unit volume in
the Company's core product lines.

     Gross margin decreased to 31.5% from 33.0%, reflecting price
competi-
tion in the retail channel.

                                  1996        1995        1994
     Net sales                  $45,210     $40,366     $38,001
     Gross profit                14,241      13,321      12,540

"""


def test_hard_wrapped_plain_text_is_rewrapped(tmp_path):
    data = {
        "cik": "0000123",
        "year": "1996",
        "filename": "123_10K_1996_x.txt",
        "item_1": "",
        "item_7": HARD_WRAPPED,
        "item_8": "   ",
        "company": "ACME WIDGETS INC /DE/",
    }
    (tmp_path / "123.json").write_text(json.dumps(data))
    doc = one_doc(tmp_path / "123.json")
    assert doc.doc_id == "sec10k-123-1996" and doc.institution == "ACME WIDGETS INC"
    assert [b.section_path for b in doc.blocks] == [MDNA] * 3
    assert doc.blocks[0].text == (
        "Net sales increased 12% to $45.2 million in fiscal 1996 from $40.4 million in fiscal "
        "1995, primarily as a result of higher unit volume in the Company's core product lines."
    )
    assert (
        doc.blocks[1].text == "Gross margin decreased to 31.5% from 33.0%, reflecting price competi-tion in the retail channel."
    )
    table = doc.blocks[2].text
    assert table.count("\n") == 2 and "Net sales                  $45,210" in table  # column layout kept
    assert [b.block_id for b in doc.blocks] == [f"sec10k-123-1996-item7-{i}" for i in (1, 2, 3)]


def test_paragraphs_without_blank_lines():
    text = "Overview\nFirst paragraph ends here.\n•\nBullet one\n(1)\nFootnote text.\nPART II"
    assert paragraphs(text) == ["Overview", "First paragraph ends here.", "• Bullet one", "(1) Footnote text."]


def test_item_titles_and_company_names():
    assert item_title("14", 2001).startswith("Exhibits")
    assert item_title("14", 2013) == "Principal Accountant Fees and Services"
    assert item_title("4", 2008) == "Submission of Matters to a Vote of Security Holders"
    assert item_title("4", 2013) == "Mine Safety Disclosures"
    assert clean_company("HOME HEALTH CORP OF AMERICA INC \\PA\\") == "HOME HEALTH CORP OF AMERICA INC"
    assert clean_company("WALT DISNEY CO/") == "WALT DISNEY CO"


@pytest.mark.parametrize(
    "content, field",
    [
        ('{"cik": "1", "item_7": ', None),  # malformed
        ('[{"item_7": "text"}]', None),  # not an object
        ('{"cik": "1", "name": "Tesla", "filings": {}}', "item_*"),  # some other JSON
        ('{"cik": "1", "item_1": "", "item_7": "  "}', "item_*"),  # every item empty
        ('{"item_7": "Some text."}', "cik"),  # no CIK anywhere
    ],
)
def test_unusable_json_is_quarantined(tmp_path, content, field):
    p = tmp_path / "x.json"
    p.write_text(content)
    docs, quarantined = load(p)
    assert docs == [] and len(quarantined) == 1
    assert quarantined[0].field == field and quarantined[0].path == str(p)


def test_non_string_item_is_quarantined_but_the_rest_loads(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"cik": "77", "year": 2010, "item_1": {"oops": 1}, "item_7": "Results were fine."}))
    docs, quarantined = load(p)
    assert [q.field for q in quarantined] == ["item_1"]
    assert [b.text for b in docs[0].blocks] == ["Results were fine."]
    assert docs[0].institution == "CIK 77" and docs[0].doc_id == "sec10k-77-2010"
