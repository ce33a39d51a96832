"""Percent agreement and Gwet's AC1 (agreement.py) against worked examples from the literature,
and the `finhallu agreement` command."""

from __future__ import annotations

import csv
import json

import pytest

from finhallu.cli import main
from finhallu.agreement import agreement_report, cohen_kappa, gwet_ac1, percent_agreement, read_ratings
from conftest import ROOT

N = None


def _from_table(table: list[list[int]], cats: list[str]) -> list[list[str]]:
    return [[cats[i], cats[j]] for i, row in enumerate(table) for j, n in enumerate(row) for _ in range(n)]


def test_two_raters_match_gwet_2014_cont3x3abstractors():
    """Gwet (2014), Handbook of Inter-Rater Reliability; the `cont3x3abstractors` table of the
    irrCAC R package (two abstractors, 100 cases, categories Ectopic/AIU/NIU). Published: Cohen's
    kappa 0.7964094. AC1 by Gwet's formulas: p_a = 0.89, pi = (0.13, 0.255, 0.615),
    p_e = (0.1131 + 0.189975 + 0.236775) / 2 = 0.269925, AC1 = 0.620075 / 0.730075 = 0.84933; the published
    value is 0.849 (irrCAC's table tests, afergadis/irrCAC test/unit/irrCAC/table/test_gwet.py)."""
    ratings = _from_table([[13, 0, 0], [0, 20, 7], [0, 4, 56]], ["Ectopic", "AIU", "NIU"])
    stats = gwet_ac1(ratings)
    assert stats["pa"] == pytest.approx(0.89)
    assert stats["pe"] == pytest.approx(0.269925)
    assert stats["ac1"] == pytest.approx(0.84933, abs=5e-5)
    assert cohen_kappa(ratings) == pytest.approx(0.7964094, abs=1e-7)


def test_many_raters_with_missing_ratings_match_irrcac_cac_raw4raters():
    """irrCAC's `cac.raw4raters` (Gwet 2014, 12 subjects, 4 raters, 5 categories, missing ratings):
    gwet.ac1.raw gives AC1 = 0.7754, with p_a = 0.8182 over the 11 subjects rated by two or more raters
    (published to 3 digits as pa 0.818, pe 0.190, AC1 0.775 in irrCAC's raw-data tests)."""
    raw = [
        [1, 1, N, 1],
        [2, 2, 3, 2],
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],
        [4, 4, 4, 4],
        [1, 1, 2, 1],
        [2, 2, 2, 2],
        [N, 5, 5, 5],
        [N, N, 1, 1],
        [N, N, 3, N],
    ]
    stats = gwet_ac1(raw)
    assert stats["pa"] == pytest.approx(0.818182, abs=1e-6)
    assert stats["ac1"] == pytest.approx(0.7754, abs=5e-5)
    assert round(stats["pe"], 3) == 0.190
    assert stats["subjects"] == 11  # the subject rated once counts in pi_k, not in p_a


def test_ac1_resists_the_kappa_paradox():
    """High agreement on a rare category: kappa collapses (-0.023), AC1 stays high (0.94): the paradox of
    Feinstein & Cicchetti (1990) that AC1 was built for (Gwet 2008; Wongpakaran et al. 2013). Computed by hand:
    kappa: p_o = 0.944, p_e = (123*120 + 2*5) / 125^2 = 0.94528; AC1: p_e = 2 * 0.972 * 0.028 = 0.054432."""
    ratings = _from_table([[118, 5], [2, 0]], ["no", "yes"])
    assert percent_agreement(ratings) == pytest.approx(118 / 125)
    assert cohen_kappa(ratings) == pytest.approx(-0.0234, abs=1e-4)
    assert gwet_ac1(ratings)["ac1"] == pytest.approx(0.9408, abs=1e-4)


def test_agreement_edge_cases():
    assert gwet_ac1([["a", "a"], ["a", "a"]])["ac1"] == 1.0  # one category: complete agreement
    with pytest.raises(ValueError):
        percent_agreement([["a", None], [None, "b"]])
    # declared but unused categories lower the chance agreement
    assert gwet_ac1([["1", "1"], ["2", "1"]], ["1", "2", "3"])["pe"] < gwet_ac1([["1", "1"], ["2", "1"]])["pe"]


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "criterion", "rater", "rating"])
        w.writerows(rows)


def test_report_human_human_and_human_llm(tmp_path):
    rows = []
    for i, (h1, h2, llm) in enumerate([("3", "3", "3"), ("2", "2", "3"), ("3", "3.0", "3"), ("1", "2", "1")]):
        rows += [(f"d{i}", "coherency", "ann_a", h1), (f"d{i}", "coherency", "ann_b", h2), (f"d{i}", "coherency", "gpt", llm)]
    rows += [
        ("d0", "correctness", "ann_a", "1"),
        ("d0", "correctness", "ann_b", "1"),
        ("d1", "correctness", "ann_a", "0"),
        ("d1", "correctness", "ann_b", ""),
        ("d2", "correctness", "ann_a", "1"),
        ("d2", "correctness", "ann_b", "1"),
    ]
    path = tmp_path / "r.csv"
    _write(path, rows)
    report = {r["criterion"]: r for r in agreement_report(read_ratings(path), llm_rater="gpt")}
    coh = report["coherency"]
    assert coh["human_human_pa"] == pytest.approx(3 / 4)  # "3" and "3.0" are one category
    pair_a = gwet_ac1([["3", "3"], ["2", "3"], ["3", "3"], ["1", "1"]], ["1", "2", "3"])
    pair_b = gwet_ac1([["3", "3"], ["2", "3"], ["3", "3"], ["2", "1"]], ["1", "2", "3"])
    assert coh["human_llm_ac1"] == pytest.approx((pair_a["ac1"] + pair_b["ac1"]) / 2)
    assert coh["human_llm_pa"] == pytest.approx((3 / 4 + 2 / 4) / 2)
    corr = report["correctness"]
    assert corr["human_human_pa"] == 1.0 and "human_llm_ac1" not in corr  # d1's missing rating is skipped


def test_cli_agreement_reads_the_example_csv(tmp_path, capsys):
    example = ROOT / "examples" / "judge_ratings.csv"
    assert main(["agreement", str(example), "--json", "--home", str(tmp_path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["criterion"] for r in rows} == {"answerability", "plausibility", "correctness", "diversity", "coherency"}
    for r in rows:
        assert 0 <= r["human_human_pa"] <= 1 and r["human_llm_ac1"] <= 1 and r["items"] == 12
    assert main(["agreement", str(example), "--home", str(tmp_path)]) == 0
    assert "human_human_ac1" in capsys.readouterr().out
    bad = tmp_path / "bad.csv"
    bad.write_text("id,score\n1,2\n")
    assert main(["agreement", str(bad), "--home", str(tmp_path)]) == 1
