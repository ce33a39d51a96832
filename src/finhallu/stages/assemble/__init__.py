"""assemble: QC-passing injections -> paired turn-level `samples` and `dataset_stats`.

Each kept injection yields a pair sharing history, query and passages: the hallucinated
sample and its faithful counterpart (the original answer, or for False Acceptance a refusal
over the same hard negatives, i.e. a True Refusal). Statistics follow the paper's Table 2
plus the validity measures of DESIGN (fingerprints, leakage, retrieval recall).
"""

from __future__ import annotations

from typing import Any, Callable, TypedDict, cast

import numpy as np
import polars as pl

from finhallu.taxonomy import labels_for
from finhallu.text import sentences
from finhallu.schemas.contracts import CONTRACTS
from finhallu.schemas.rules import INSTITUTION_IN_ONE_SPLIT, Rule
from finhallu.injectors import minimal_edit_subtypes, subtypes_by_type
from finhallu.schemas.rows import DatasetStatsRow, Message, SamplePassage, SamplesRow
from finhallu.stages.base import Frames, Stage, StageContext, typed_rows_frame
from finhallu.ids import stable_id
from finhallu.stages.assemble.validity import fingerprint_scores, shortcut_scores
from finhallu.schemas.section import Section


class AssembleConfig(Section):
    fingerprint_folds: int = 5


# Adds one `dataset_stats` row: (split, metric, slice, value).
StatAdder = Callable[[str, str, str, Any], None]


class _PairColumns(TypedDict):
    """What both samples of a pair share: a `samples` row less its sample id, response and labels."""

    pair_id: str
    dialogue_id: str
    split: str
    source: str
    institution: str | None
    lang: str | None
    turn_index: int | None
    history: list[Message]
    query: str
    standalone_query: str | None
    passages: list[SamplePassage]
    answerable: bool
    injector: str | None


def build_samples(inputs: Frames) -> pl.DataFrame:
    passages = {p["passage_id"]: p for p in inputs["passages"].select("passage_id", "text").iter_rows(named=True)}
    dialogues = {d["dialogue_id"]: d for d in inputs["dialogues"].iter_rows(named=True)}
    # Only what a sample shows of a turn reaches Python (all of `turns`' rows as dicts held 450 MB
    # at 3,060 documents: contexts, clues, answers).
    shown_turns = inputs["turns"].select("dialogue_id", "turn_index", "query", "response", "standalone_query", "answerable")
    turns: dict[str, list[dict[str, Any]]] = {}
    for t in shown_turns.sort("dialogue_id", "turn_index").iter_rows(named=True):
        turns.setdefault(t["dialogue_id"], []).append(t)
    passed = set(inputs["injection_qc"].filter(pl.col("passed"))["injection_id"].to_list())
    rows: list[SamplesRow] = []
    for inj in inputs["injections"].filter(pl.col("injection_id").is_in(list(passed))).sort("injection_id").iter_rows(named=True):
        d = dialogues[inj["dialogue_id"]]
        dturns = turns[inj["dialogue_id"]]
        turn = dturns[inj["turn_index"] - 1]
        history: list[Message] = []
        for t in dturns[: inj["turn_index"] - 1]:
            history += [{"role": "user", "content": t["query"]}, {"role": "assistant", "content": t["response"]}]
        shown: list[SamplePassage] = [
            {"passage_id": c["passage_id"], "text": passages[c["passage_id"]]["text"], "role": c["role"]}
            for c in inj["injected_context"]
        ]
        answerable = inj["hallu_type"] not in ("false_acceptance",) and turn["answerable"]
        base: _PairColumns = {
            "pair_id": inj["injection_id"],
            "dialogue_id": d["dialogue_id"],
            "split": d["split"],
            "source": d["source"],
            "institution": d["institution"],
            "lang": d["lang"],
            "turn_index": inj["turn_index"],
            "history": history,
            "query": turn["query"],
            "standalone_query": turn["standalone_query"],
            "passages": shown,
            "answerable": answerable,
            "injector": inj["injector"],
        }
        hb, h4 = labels_for(inj["hallu_type"], answerable)
        rows.append(
            {
                **base,
                "sample_id": f"smp-{stable_id(inj['injection_id'], 'h')}",
                "response": inj["injected_response"],
                "label_binary": hb,
                "label_4class": h4,
                "hallu_type": inj["hallu_type"],
                "hallu_subtype": inj["hallu_subtype"],
            }
        )
        fb, f4 = labels_for(None, answerable)
        rows.append(
            {
                **base,
                "sample_id": f"smp-{stable_id(inj['injection_id'], 'f')}",
                "response": inj["counterpart_response"],
                "label_binary": fb,
                "label_4class": f4,
                "hallu_type": None,
                "hallu_subtype": None,
            }
        )
    return typed_rows_frame(rows, CONTRACTS["samples"].columns, "sample_id")


_PUNCT_TAGS = ("SF", "SP", "SS", "SE", "SO", "SW")


_MORPHEMES: dict[str, int] = {}  # per text: a pair's two samples share the query; "all" and each split ask again


def clear_memo() -> None:
    _MORPHEMES.clear()


def morpheme_counts(texts: list[str]) -> list[int]:
    """Kiwi morphemes per text, punctuation excluded (Table 2 counts Korean length in morphemes);
    each distinct text analysed once, those not seen yet in one batch."""
    todo = [t for t in dict.fromkeys(texts) if t not in _MORPHEMES]
    for text, toks in zip(todo, sentences.tokenize_korean_many(todo)):
        _MORPHEMES[text] = sum(1 for t in toks if not t.tag.startswith(_PUNCT_TAGS))
    return [_MORPHEMES[t] for t in texts]


def _mean(col: pl.Series) -> float:
    """A numeric column's mean (polars types a reduction as any Python value)."""
    return cast(float, col.mean())


def _table2(s: pl.DataFrame, dialogues: pl.DataFrame, add: StatAdder) -> None:
    """The paper's Table 2 for one split: dialogues, unique passages, turns, lengths, % unanswerable."""
    split = s["split"][0] if s["split"].n_unique() == 1 else "all"
    add(split, "dialogues", "all", s["dialogue_id"].n_unique())
    shown = s.select(pl.col("passages").list.eval(pl.element().struct.field("passage_id")).alias("p")).explode("p")
    add(split, "unique_passages", "all", shown["p"].n_unique())
    add(split, "turns_min", "all", s["turn_index"].min())
    add(split, "turns_max", "all", s["turn_index"].max())
    add(split, "turns_mean", "all", s["turn_index"].mean())
    base = dialogues.filter(pl.col("dialogue_id").is_in(s["dialogue_id"].unique().to_list()))
    add(split, "dialogue_turns_min", "all", base["n_turns"].min())
    add(split, "dialogue_turns_max", "all", base["n_turns"].max())
    add(split, "dialogue_turns_mean", "all", base["n_turns"].mean())
    add(split, "mean_query_words", "all", s["query"].str.split(" ").list.len().mean())
    add(split, "mean_response_words", "all", s["response"].str.split(" ").list.len().mean())
    ko = s.filter(pl.col("lang") == "ko")
    if ko.height:  # Korean lengths in morphemes (Kiwi), as the paper reports them
        add(split, "mean_query_morphemes", "ko", float(np.mean(morpheme_counts(ko["query"].to_list()))))
        add(split, "mean_response_morphemes", "ko", float(np.mean(morpheme_counts(ko["response"].to_list()))))
    add(split, "pct_unanswerable", "all", 100.0 * _mean(~s["answerable"]))
    add(split, "mean_turn_index", "all", s["turn_index"].mean())
    add(split, "mean_history_turns", "all", _mean(s["history"].list.len()) / 2)
    add(split, "mean_response_chars", "all", s["response"].str.len_chars().mean())
    add(split, "mean_query_chars", "all", s["query"].str.len_chars().mean())


def _label_verification(injections: pl.DataFrame, iq: pl.DataFrame, add: StatAdder) -> None:
    """Per type/subtype: generated, verified by the label verifier, passed QC, dropped by reason
    (the reason's rule: "hallucinated: number_error", "counterpart: faithful_answer", "fluency")."""
    if not iq.height:
        return
    j = injections.join(iq, on="injection_id").with_columns(
        leaf=pl.concat_str([pl.col("hallu_type"), pl.col("hallu_subtype").fill_null("")], separator="/").str.strip_chars("/")
    )
    for leaf, g in sorted(j.group_by("leaf"), key=lambda x: x[0]):
        add("all", "label_generated", leaf[0], g.height)
        add("all", "label_verified", leaf[0], g["verified"].sum())
        add("all", "label_passed_qc", leaf[0], g["passed"].sum())
        why = (
            g.select(pl.col("verify_reasons").list.eval(pl.element().str.extract(r"^(\w+: [\w ]+?)(?::|$)", 1)).list.unique())
            .explode("verify_reasons")
            .drop_nulls()
        )
        for reason, n in why.group_by("verify_reasons").len().sort("verify_reasons").iter_rows():
            add("all", "label_dropped_by", f"{leaf[0]} | {reason}", n)
    add("all", "label_verified_share", "all", j["verified"].mean())


def _coverage(samples: pl.DataFrame, documents: pl.DataFrame, add: StatAdder) -> None:
    """Documents and samples per split and source (coverage.py reads empty ones as warnings)."""
    for metric, frame in (("coverage_documents", documents), ("coverage_samples", samples)):
        if frame.height:
            for split, source, n in frame.group_by("split", "source").len().sort("split", "source").iter_rows():
                add(split, metric, source, n)


def _split_composition(samples: pl.DataFrame, kept: pl.DataFrame, dialogues: pl.DataFrame, add: StatAdder) -> None:
    """Per split (and all): samples, pairs, Table 2, and the samples and kept pairs by each facet."""
    for split in ["all"] + sorted(samples["split"].unique().to_list()):
        s = samples if split == "all" else samples.filter(pl.col("split") == split)
        add(split, "samples", "all", s.height)
        add(split, "pairs", "all", s["pair_id"].n_unique())
        _table2(s if split != "all" else s.with_columns(split=pl.lit("all")), dialogues, add)
        for col in ("label_4class", "hallu_type", "hallu_subtype", "source", "lang", "injector", "institution"):
            for key, n in s.group_by(col).len().sort(col).iter_rows():
                if key is not None:
                    add(split, f"samples_by_{col}", key, n)
        k = kept if split == "all" else kept.filter(pl.col("split") == split)
        for key, n in k.group_by("strategy").len().sort("strategy").iter_rows():
            add(split, "pairs_by_strategy", key, n)


def _edit_sizes(kept: pl.DataFrame, add: StatAdder) -> None:
    """Edit size of the minimal-edit subtypes (kept injections): small by construction."""
    for sub in minimal_edit_subtypes():
        k = kept.filter(pl.col("hallu_subtype") == sub)
        if k.height:
            add("all", "mean_edit_words", sub, k["edit_words"].mean())
            add("all", "max_edit_words", sub, k["edit_words"].max())
            add("all", "mean_edit_chars", sub, k["edit_chars"].mean())


def _dropped_by(qc: pl.DataFrame, crit: str) -> int:
    """QC rows one of whose reasons is the criterion's."""
    return qc.filter(pl.col("reasons").list.eval(pl.element().str.starts_with(crit + " ")).list.any()).height


def _dialogue_qc(d: pl.DataFrame, qc: pl.DataFrame, add: StatAdder) -> None:
    """Dialogues generated, their QC retention (all and per split), QC scores and drops per criterion."""
    add("all", "dialogues_generated", "all", d.height)
    add("all", "dialogue_retention", "all", qc["passed"].mean() if qc.height else 0.0)
    for split in sorted(d["split"].unique().to_list()):
        ids = d.filter(pl.col("split") == split)["dialogue_id"].to_list()
        q = qc.filter(pl.col("dialogue_id").is_in(ids))
        add(split, "dialogue_retention", "all", q["passed"].mean() if q.height else 0.0)
    for crit in ("answerability", "plausibility", "correctness", "diversity", "coherency"):
        if qc.height:
            add("all", "dialogue_qc_mean", crit, qc[crit].mean())
            add("all", "dialogue_qc_dropped_by", crit, _dropped_by(qc, crit))
    add("all", "mean_turns_per_dialogue", "all", d["n_turns"].mean())
    add("all", "dialogues_with_reconfirm", "all", d["has_reconfirm"].sum())


def _injection_qc(injections: pl.DataFrame, iq: pl.DataFrame, add: StatAdder) -> None:
    """Injections generated, their QC retention and drops per criterion."""
    add("all", "injections_generated", "all", injections.height)
    add("all", "injection_retention", "all", iq["passed"].mean() if iq.height else 0.0)
    for crit in ("appropriateness", "naturalness"):
        if iq.height:
            add("all", "injection_qc_dropped_by", crit, _dropped_by(iq, crit))


def _leakage(samples: pl.DataFrame, add: StatAdder) -> None:
    """Passages and institutions shared between splits (must be 0)."""
    shown = samples.select("split", pl.col("passages").list.eval(pl.element().struct.field("passage_id")).alias("p")).explode("p")
    add(
        "all",
        "leakage_passages_in_two_splits",
        "all",
        shown.group_by("p").agg(pl.col("split").n_unique()).filter(pl.col("split") > 1).height,
    )
    add(
        "all",
        "leakage_institutions_in_two_splits",
        "all",
        samples.group_by("institution").agg(pl.col("split").n_unique()).filter(pl.col("split") > 1).height,
    )


def _retrieval(retrievals: pl.DataFrame, seeds: pl.DataFrame, hard_negatives: pl.DataFrame, add: StatAdder) -> None:
    """Gold-passage recall at 1/5/10 over answerable seeds, and the hard-negative filter's retention."""
    n_answerable = int(seeds["answerable"].sum()) or 1
    for depth in (1, 5, 10):
        hit = retrievals.filter(pl.col("is_gold") & (pl.col("rank") <= depth))["seed_id"].n_unique()
        add("all", f"retrieval_recall@{depth}", "all", hit / n_answerable)
    hn = hard_negatives
    step1 = hn.filter(pl.col("clue_absent") & pl.col("answer_absent"))
    add("all", "hard_negative_candidates", "all", hn.height)
    add("all", "hard_negative_step1_retention", "all", step1.height / max(1, hn.height))
    judged = step1.filter(pl.col("unanswerable").is_not_null())  # step 2 asks lazily (retrieve.judge_lazily)
    add("all", "hard_negative_judged", "all", judged.height)
    add("all", "hard_negative_step2_retention", "all", judged["is_hard_negative"].sum() / max(1, judged.height))


def dataset_stats(samples: pl.DataFrame, inputs: Frames, cfg: AssembleConfig, seed: int) -> pl.DataFrame:
    rows: list[DatasetStatsRow] = []

    def add(split: str, metric: str, slice_: str, value: Any) -> None:
        rows.append({"split": split, "metric": metric, "slice": slice_, "value": float(value)})

    injections = inputs["injections"]
    kept = injections.filter(pl.col("injection_id").is_in(samples["pair_id"].unique().to_list()))
    _split_composition(samples, kept, inputs["dialogues"], add)
    _edit_sizes(kept, add)
    _dialogue_qc(inputs["dialogues"], inputs["dialogue_qc"], add)
    _injection_qc(injections, inputs["injection_qc"], add)
    _label_verification(injections, inputs["injection_qc"], add)
    _coverage(samples, inputs["documents"], add)
    _leakage(samples, add)
    _retrieval(inputs["retrievals"], inputs["qa_seeds"], inputs["hard_negatives"], add)
    for metric, slice_, value in fingerprint_scores(samples, cfg.fingerprint_folds, seed) + shortcut_scores(samples):
        add("all", metric, slice_, value)
    return pl.DataFrame(rows)


def run(inputs: Frames, ctx: StageContext[AssembleConfig]) -> Frames:
    cfg = ctx.config
    samples = build_samples(inputs)
    if samples.height == 0:  # nothing survived QC: let the samples gate say so (exit 2), not a crash
        return {"samples": samples, "dataset_stats": pl.DataFrame()}
    ctx.progress(1, 2)
    stats = dataset_stats(samples, inputs, cfg, ctx.seed)
    ctx.progress(2, 2)
    return {"samples": samples, "dataset_stats": stats}


# ---- gate rules -------------------------------------------------------------------------------
def _pairs_complete(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    return (
        df.group_by("pair_id")
        .agg(
            n_faithful=(pl.col("label_binary") == "faithful").sum(),
            n_hallucinated=(pl.col("label_binary") == "hallucinated").sum(),
            n_turn_keys=pl.struct("dialogue_id", "turn_index", "query").n_unique(),
        )
        .with_columns(ok=(pl.col("n_faithful") == 1) & (pl.col("n_hallucinated") == 1) & (pl.col("n_turn_keys") == 1))
        .sort("pair_id")
    )


def _labels_consistent(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    subtypes = subtypes_by_type()
    rows = []
    for r in df.select("sample_id", "hallu_type", "hallu_subtype", "answerable", "label_binary", "label_4class").iter_rows(
        named=True
    ):
        expect = labels_for(r["hallu_type"], r["answerable"])
        sub_ok = (r["hallu_subtype"] is None and (r["hallu_type"] is None or not subtypes[r["hallu_type"]])) or (
            r["hallu_type"] is not None and r["hallu_subtype"] in subtypes[r["hallu_type"]]
        )
        rows.append(
            {
                "sample_id": r["sample_id"],
                "expected": "/".join(expect),
                "ok": expect == (r["label_binary"], r["label_4class"]) and sub_ok,
            }
        )
    return pl.DataFrame(rows, schema={"sample_id": pl.String, "expected": pl.String, "ok": pl.Boolean})


def _no_split_leakage(df: pl.DataFrame, nb: dict) -> pl.DataFrame:
    """Every passage shown in a sample belongs to a document of the sample's split."""
    psplit = nb["passages"].select("passage_id", pl.col("split").alias("passage_split"))
    return (
        df.select("sample_id", "split", pl.col("passages").list.eval(pl.element().struct.field("passage_id")).alias("pid"))
        .explode("pid")
        .rename({"pid": "passage_id"})
        .join(psplit, on="passage_id", how="left")
        .with_columns(ok=pl.col("passage_split") == pl.col("split"))
        .fill_null(False)
    )


STAGE = Stage(
    "assemble",
    run,
    AssembleConfig,
    inputs=(
        "dialogues",
        "turns",
        "injections",
        "injection_qc",
        "passages",
        "dialogue_qc",
        "retrievals",
        "hard_negatives",
        "qa_seeds",
        "documents",
    ),
    outputs=("samples", "dataset_stats"),
    description="paired samples, splits, statistics",
    imports=("sklearn.feature_extraction.text", "sklearn.linear_model", "sklearn.model_selection"),  # validity probes
    rules={
        "samples": (
            Rule("pairs_complete", "each pair holds one faithful and one hallucinated sample of the same turn", _pairs_complete),
            Rule("labels_consistent", "labels follow the taxonomy from type and answerability", _labels_consistent),
            Rule("no_split_leakage", "every passage shown belongs to a document of the sample's split", _no_split_leakage),
            INSTITUTION_IN_ONE_SPLIT,
        )
    },
)
