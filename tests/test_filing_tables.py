"""10-K tables read on the HTML grid: currency, percent and parenthesis cells merge into their value
and every value sits under its own period (shared real filings, plus hostile layouts)."""

from pathlib import Path

import pytest

from finhallu.sources.filing_tables import to_markdown
from finhallu.sources.sec10k import load_10k
from finhallu.sources.tables import parse_markdown_table


def _tables(path: Path) -> list[tuple[list[str], list[list[str]]]]:
    doc = next(d for d in load_10k(path) if hasattr(d, "blocks"))
    out = []
    for b in doc.blocks:
        if b.kind == "table":
            md = "\n".join(ln for ln in b.text.splitlines() if ln.startswith("|"))
            out.append(parse_markdown_table(md))
    return out


def _row(tables, label: str, must_have: str) -> dict[str, str]:
    """{column header: value} of the first row called `label` in a table whose headers mention `must_have`."""
    for header, body in tables:
        if not any(must_have in h for h in header):
            continue
        for row in body:
            if row[0] == label:
                assert len(row) == len(header), (header, row)
                return dict(zip(header[1:], row[1:]))
    raise AssertionError(f"no row {label!r} under a header with {must_have!r}")


def _fixture(real_data, name: str) -> Path:
    path = real_data / "sec10k" / "html" / name
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout's shared data")
    return path


def test_apple_net_sales_under_their_fiscal_years(real_data):
    tables = _tables(_fixture(real_data, "aapl-10-k-2024-11-01.html"))
    by_region = _row(tables, "Total net sales", "Change")
    assert by_region == {"2024": "$391,035", "Change": "2%", "2023": "$383,285", "2022": "$394,328"} or (
        [v for k, v in by_region.items() if k != "Change"] == ["$391,035", "$383,285", "$394,328"]
    )
    statement = _row(tables, "Net income", "September 28, 2024")
    years = {k[-4:]: v for k, v in statement.items()}
    assert years == {"2024": "$93,736", "2023": "$96,995", "2022": "$99,803"}
    other = _row(tables, "Other income/(expense), net", "September 28, 2024")
    assert [v for v in other.values()] == ["269", "(565)", "(334)"]
    # The gross margin percentages sit in a <table> of their own under the one that names the years.
    assert _row(tables, "Total gross margin percentage", "2023") == {"2024": "46.2%", "2023": "44.1%", "2022": "43.3%"}


def test_a_headed_table_does_not_lend_its_header_to_another_kind_of_table():
    from finhallu.sources.sec10k import _continued_tables

    headed = ("table", "| | 2024 | 2023 |\n| --- | --- | --- |\n| Sales | $5 | $4 |")
    cont = ("table", "| Margin: | | |\n| --- | --- | --- |\n| Products | 37% | 36% |")
    wider = ("table", "| | | | |\n| --- | --- | --- | --- |\n| a | 1 | 2 | 3 |")
    out = _continued_tables([headed, cont, ("text", "Other matters."), cont, wider])
    assert out[1][1].splitlines()[0] == "| Margin: | 2024 | 2023 |"
    assert out[3] == cont and out[4] == wider  # not right after a headed table of the same width


def test_nvidia_income_statement_aligned(real_data):
    tables = _tables(_fixture(real_data, "nvda-10-k-2025-02-26.html"))
    revenue = _row(tables, "Revenue", "Jan 29, 2023")
    assert {k[-12:]: v for k, v in revenue.items()} == {
        "Jan 26, 2025": "$130,497",
        "Jan 28, 2024": "$60,922",
        "Jan 29, 2023": "$26,974",
    }
    summary = _row(tables, "Net income", "Change")
    assert list(summary.values()) == ["$72,880", "$29,760", "Up 145%"]


def test_right_aligned_values_find_their_header(real_data):
    tables = _tables(_fixture(real_data, "parity_gate_10-K_0001193125-10-073212.html"))
    row = _row(tables, "Net income (loss)", "2008")
    assert [k[-4:] for k in row] == ["2009", "2008"] and list(row.values()) == ["$4,073", "(3,401)"]


def test_symbol_cells_merge_and_spacers_go():
    def cell(text, colspan=1):
        return (text, 1, colspan)

    rows = [
        [cell(""), cell("Year ended", 12)],
        [cell(""), cell("2024", 3), cell(""), cell("2023", 3), cell(""), cell("% Change", 3)],
        [cell("(in millions)", 13)],
        [
            cell("Net income (loss)"),
            cell("$"),
            cell("(2,722"),
            cell(")"),
            cell(""),
            cell("$"),
            cell("30,425"),
            cell(""),
            cell(""),
            cell("(109"),
            cell(")%"),
            cell(""),
        ],
        [
            cell("Revenue"),
            cell("1,200", 2),
            cell(""),
            cell(""),
            cell("900", 2),
            cell(""),
            cell(""),
            cell("33"),
            cell("%"),
            cell(""),
        ],
    ]
    md, unit = to_markdown(rows)
    header, body = parse_markdown_table(md)
    assert unit == "(in millions)"
    assert header == ["", "Year ended 2024", "Year ended 2023", "Year ended % Change"]
    assert body == [["Net income (loss)", "$(2,722)", "$30,425", "(109)%"], ["Revenue", "1,200", "900", "33%"]]


def test_page_furniture_is_removed_and_cut_sentences_rejoined():
    from finhallu.sources.furniture import strip_furniture

    blocks = (
        [("text", "ACME CORP AND SUBSIDIARIES")]
        + [
            ("text", "Revenue grew because customers bought more widgets in the"),
            ("text", "23"),
            ("text", "Table of Contents"),
            ("text", "ACME CORP AND SUBSIDIARIES"),
            ("text", "fourth quarter than a year before."),
            ("table", "| a | b |\n| --- | --- |\n| x | 1 |"),
            ("text", "- 24 -"),
            ("text", "F-3"),
            ("text", "(Continued)"),
            ("text", "Not applicable."),
        ]
        + [("text", "ACME CORP AND SUBSIDIARIES"), ("text", "Page 7")] * 4
    )
    out = strip_furniture(blocks)
    texts = [t for k, t in out if k == "text"]
    assert texts == [
        "ACME CORP AND SUBSIDIARIES",
        "Revenue grew because customers bought more widgets in the fourth quarter than a year before.",
        "Not applicable.",
    ]
    assert ("table", "| a | b |\n| --- | --- |\n| x | 1 |") in out


def test_page_numbered_footers_go_and_numbered_headings_stay():
    """Apple's footer "Apple Inc. | 2024 Form 10-K | 20" carries a new page number on each page."""
    from finhallu.sources.furniture import is_furniture, strip_furniture

    assert is_furniture("Apple Inc. | 2024 Form 10-K | 20") and not is_furniture("Form 10-K filed in 2024 lists 20 risks")
    blocks = (
        [("text", f"Hanriver Bank Annual Report {n}") for n in range(3, 9)]
        + [("text", f"ITEM {n}") for n in range(1, 7)]
        + [("text", "Note 3"), ("text", "Sales rose 5 percent in 2024")]
    )
    texts = [t for _, t in strip_furniture(blocks)]
    assert texts == [f"ITEM {n}" for n in range(1, 7)] + ["Note 3", "Sales rose 5 percent in 2024"]


@pytest.mark.parametrize(
    "name", ["nvda-10-k-2025-02-26.html", "parity_gate_10-K_0001193125-10-073212.html", "aapl-10-k-2024-11-01.html"]
)
def test_no_passage_of_a_real_filing_is_page_furniture(real_data, name):
    from collections import Counter

    from finhallu.sources.furniture import is_furniture

    doc = next(d for d in load_10k(_fixture(real_data, name)) if hasattr(d, "blocks"))
    texts = [b.text.strip() for b in doc.blocks if b.kind == "text"]
    assert not [t for t in texts if is_furniture(t)]
    repeats = Counter(t for t in texts if len(t) <= 80 and not t.endswith((".", ":")))
    assert max(repeats.values(), default=0) < 5, repeats.most_common(3)


@pytest.mark.parametrize(
    "name,statement_row",
    [
        ("aapl-10-k-2024-11-01.html", "Total net sales"),
        ("nvda-10-k-2025-02-26.html", "Cost of revenue"),  # statements printed after Item 15
        ("parity_gate_10-K_0001193125-10-073212.html", "Total investments"),  # GAINSCO, after Item 15
    ],
)
def test_statements_carry_the_financial_statements_role_whatever_item_they_follow(real_data, name, statement_row):
    doc = next(d for d in load_10k(_fixture(real_data, name)) if hasattr(d, "blocks"))
    statements = [
        b
        for b in doc.blocks
        if b.kind == "table" and f"| {statement_row} |" in b.text and b.section_path.startswith(("Item 8", "Item 15", "Item 16"))
    ]
    assert statements, statement_row
    assert all(b.role == "financial_statements" for b in statements), {b.section_path for b in statements}
    roles = {b.role for b in doc.blocks}
    assert {"risk_factors", "mda"} <= roles
    assert all(b.role == "mda" for b in doc.blocks if b.section_path.startswith("Item 7."))


def test_an_empty_item_stays_a_section(real_data):
    doc = next(d for d in load_10k(_fixture(real_data, "nvda-10-k-2025-02-26.html")) if hasattr(d, "blocks"))
    empty = [b for b in doc.blocks if b.section_path.startswith("Item 6.")]
    assert len(empty) == 1 and empty[0].text == "" and "Reserved" in empty[0].section_path
