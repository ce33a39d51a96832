"""Stage rules: checks a per-column contract cannot express, run as GX suites on derived frames.

Each rule derives a frame with an `ok` column (one row per entity checked) from the table
and its neighbours (the stage's inputs and sibling outputs); the gate expects `ok` to be True.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import polars as pl

from finhallu.taxonomy import SUBTYPES, answer_is_checkable, labels_for
from finhallu.text.normalize import contains_normalized


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    derive: Callable[[pl.DataFrame, dict[str, pl.DataFrame]], pl.DataFrame]


def _institution_one_split(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    return (df.group_by("source", "institution").agg(pl.col("split").unique().sort().alias("splits"))
            .with_columns(ok=pl.col("splits").list.len() == 1).sort("source", "institution"))


def _pairs_complete(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    return (df.group_by("pair_id").agg(
        n_faithful=(pl.col("label_binary") == "faithful").sum(),
        n_hallucinated=(pl.col("label_binary") == "hallucinated").sum(),
        n_turn_keys=pl.struct("dialogue_id", "turn_index", "query").n_unique(),
    ).with_columns(ok=(pl.col("n_faithful") == 1) & (pl.col("n_hallucinated") == 1) & (pl.col("n_turn_keys") == 1))
        .sort("pair_id"))


def _labels_consistent(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    rows = []
    for r in df.select("sample_id", "hallu_type", "hallu_subtype", "answerable", "label_binary", "label_4class").iter_rows(named=True):
        expect = labels_for(r["hallu_type"], r["answerable"])
        sub_ok = (r["hallu_subtype"] is None and (r["hallu_type"] is None or not SUBTYPES[r["hallu_type"]])) or (
            r["hallu_type"] is not None and r["hallu_subtype"] in SUBTYPES[r["hallu_type"]])
        rows.append({"sample_id": r["sample_id"], "expected": "/".join(expect),
                     "ok": expect == (r["label_binary"], r["label_4class"]) and sub_ok})
    return pl.DataFrame(rows, schema={"sample_id": pl.String, "expected": pl.String, "ok": pl.Boolean})


def _no_split_leakage(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    """Every passage shown in a sample belongs to a document of the sample's split."""
    psplit = nb["passages"].select("passage_id", pl.col("split").alias("passage_split"))
    return (df.select("sample_id", "split", pl.col("passages").list.eval(pl.element().struct.field("passage_id")).alias("pid"))
            .explode("pid").rename({"pid": "passage_id"})
            .join(psplit, on="passage_id", how="left")
            .with_columns(ok=pl.col("passage_split") == pl.col("split")).fill_null(False))


def _hard_negative_lacks_clue(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    seeds = nb["qa_seeds"].select("seed_id", "clue_text", "answer", "answerable", "qa_kind")
    texts = nb["passages"].select("passage_id", "text")
    joined = (df.filter(pl.col("is_hard_negative")).join(seeds, on="seed_id", how="left")
              .join(texts, on="passage_id", how="left"))
    ok = []
    for r in joined.iter_rows(named=True):
        clue_in = bool(r["clue_text"]) and contains_normalized(r["text"], r["clue_text"])
        answer_in = answer_is_checkable(r) and contains_normalized(r["text"], r["answer"])
        ok.append(not clue_in and not answer_in)
    return joined.select("seed_id", "passage_id").with_columns(ok=pl.Series(ok, dtype=pl.Boolean))


def _verdicts_consistent(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    """A hard negative passed both steps; step 2 ran only where step 1 passed, and (judged lazily,
    in rank order) a seed's step-1 candidate is left unjudged only behind all its judged ones."""
    step1 = pl.col("clue_absent") & pl.col("answer_absent")
    judged = pl.col("unanswerable").is_not_null()
    last_judged = pl.when(judged).then(pl.col("candidate_rank")).max().over("seed_id").fill_null(-1)
    return df.select("seed_id", "passage_id", ok=(
        (pl.col("is_hard_negative") == (step1 & pl.col("unanswerable").fill_null(False)))
        & (~judged | step1)
        & (judged | ~step1 | (pl.col("candidate_rank") > last_judged))))


def _one_injection_per_dialogue(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    return (df.group_by("dialogue_id").agg(n_injected_turns=pl.len())
            .with_columns(ok=pl.col("n_injected_turns") == 1).sort("dialogue_id"))


def _subtype_matches_type(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    ok = [
        (sub is None and not SUBTYPES[t]) or (sub in SUBTYPES[t])
        for t, sub in zip(df["hallu_type"].to_list(), df["hallu_subtype"].to_list())
    ]
    return df.select("injection_id", "hallu_type", "hallu_subtype").with_columns(ok=pl.Series(ok, dtype=pl.Boolean))


def _turn_context_matches_answerability(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    rows = []
    for r in df.select("turn_id", "answerable", "gold_passage_id", "context").iter_rows(named=True):
        roles = [c["role"] for c in r["context"]]
        pids = [c["passage_id"] for c in r["context"]]
        if r["answerable"]:
            ok = r["gold_passage_id"] in pids and "hard_negative" not in roles
        else:
            ok = len(roles) > 0 and all(x == "hard_negative" for x in roles)
        rows.append({"turn_id": r["turn_id"], "answerable": r["answerable"], "ok": ok})
    return pl.DataFrame(rows, schema={"turn_id": pl.String, "answerable": pl.Boolean, "ok": pl.Boolean})


def _dialogue_turn_count(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    counts = nb["turns"].group_by("dialogue_id").agg(actual=pl.len(), max_index=pl.col("turn_index").max())
    return (df.select("dialogue_id", "n_turns").join(counts, on="dialogue_id", how="left")
            .with_columns(ok=(pl.col("actual") == pl.col("n_turns")) & (pl.col("max_index") == pl.col("n_turns")))
            .fill_null(False))


def _clue_at_offset(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    """A seed's clue is its passage's text at clue_start, character for character."""
    texts = dict(zip(nb["passages"]["passage_id"], nb["passages"]["text"]))
    rows = df.filter(pl.col("clue_text").is_not_null()).select("seed_id", "passage_id", "clue_text", "clue_start")
    ok = [s is not None and texts.get(p, "")[s:s + len(c)] == c
          for p, c, s in zip(rows["passage_id"], rows["clue_text"], rows["clue_start"])]
    return rows.select("seed_id").with_columns(ok=pl.Series(ok, dtype=pl.Boolean))


def _funnel_non_increasing(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    """Each step of a seed method's funnel keeps at most what the step before it had."""
    rows = []
    for (source, method, funnel), g in df.filter(pl.col("funnel").is_not_null()).sort("step").group_by(
            ["source", "method", "funnel"], maintain_order=True):
        values = g["value"].to_list()
        for metric, before, after in zip(g["metric"].to_list()[1:], values, values[1:]):
            rows.append({"source": source, "method": method, "metric": metric, "ok": after <= before})
    return pl.DataFrame(rows, schema={"source": pl.String, "method": pl.String, "metric": pl.String, "ok": pl.Boolean})


RULES: dict[str, list[Rule]] = {
    "qa_seeds": [Rule("clue_at_offset", "clue_text is the passage text at clue_start", _clue_at_offset)],
    "seed_qa_stats": [Rule("funnel_non_increasing", "each funnel step of a seed method keeps a subset of the one before",
                           _funnel_non_increasing)],
    "documents": [Rule("institution_in_one_split", "an institution's documents all sit in one split", _institution_one_split)],
    "hard_negatives": [Rule("hard_negative_lacks_clue", "a hard negative contains neither the clue nor the answer (normalized)",
                            _hard_negative_lacks_clue),
                       Rule("verdicts_consistent", "is_hard_negative = step 1 and step 2 passed; step 2 asked in rank order", _verdicts_consistent)],
    "dialogues": [Rule("turn_count_matches", "n_turns equals the turns published for the dialogue", _dialogue_turn_count)],
    "turns": [Rule("context_matches_answerability",
                   "answerable turns show the gold passage and no hard negative; unanswerable turns show only hard negatives",
                   _turn_context_matches_answerability)],
    "injections": [
        Rule("one_injected_turn_per_dialogue", "exactly one injected turn per base dialogue (one source each)",
             _one_injection_per_dialogue),
        Rule("subtype_matches_type", "the subtype belongs to the type", _subtype_matches_type),
    ],
    "samples": [
        Rule("pairs_complete", "each pair holds one faithful and one hallucinated sample of the same turn", _pairs_complete),
        Rule("labels_consistent", "labels follow the taxonomy from type and answerability", _labels_consistent),
        Rule("no_split_leakage", "every passage shown belongs to a document of the sample's split", _no_split_leakage),
        Rule("institution_in_one_split", "an institution's samples all sit in one split", _institution_one_split),
    ],
}
