"""Written contracts of every published table: columns and types, keys, allowed values, parents.

The gate turns a contract into a Great Expectations suite; publish casts frames to the
contract's exact schema, so a stage can never publish a drifting type.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

import polars as pl

from finhallu.taxonomy import (
    HALLU_TYPES,
    LABEL_4CLASS,
    LABEL_BINARY,
    SOURCES,
    SPLITS,
)

PROBE_MECHANISMS = ("A1", "A2", "A3", "B2", "B3", "B4", "C3", "D1", "P1")  # finhallu.probe.MECHANISMS (a test keeps them equal)
PROBE_LABELS = ("complied", "complied_then_warned", "rebutted")
S, I, F, B = pl.String, pl.Int64, pl.Float64, pl.Boolean
CONTEXT = pl.List(pl.Struct({"passage_id": S, "role": S}))
MESSAGES = pl.List(pl.Struct({"role": S, "content": S}))
SAMPLE_PASSAGES = pl.List(pl.Struct({"passage_id": S, "text": S, "role": S}))
# metrics.setting: the K-FinHallu settings plus the score threshold sweep and the tuned threshold
METRIC_SETTINGS = ("binary", "4class", "3class", "type", "sweep", "threshold")
BLOCKS = pl.List(pl.Struct({"block_id": S, "section_path": S, "kind": S, "text": S, "role": S}))


def _registered_subtypes() -> tuple[str, ...]:
    # Looked up by name: a contract must not make every stage's code version (which follows imports)
    # take in every injector's code.
    return importlib.import_module("finhallu.injectors").hallu_subtypes()


@dataclass(frozen=True)
class Contract:
    name: str
    columns: dict[str, pl.DataType]
    key: tuple[str, ...]
    not_null: tuple[str, ...] = ()
    # column -> allowed values, or a function giving them (a set plug-ins register, e.g. the subtypes)
    allowed: dict[str, tuple | Callable[[], tuple]] = field(default_factory=dict)
    # column -> "parent_table.column": every value must exist in the parent
    parents: dict[str, str] = field(default_factory=dict)
    allow_empty: bool = False
    doc: str = ""

    @property
    def schema(self) -> pl.Schema:
        return pl.Schema(self.columns)

    def conform(self, df: pl.DataFrame) -> pl.DataFrame:
        """Select the contract's columns in order and cast to its types (raises on mismatch)."""
        if df.width == 0:  # a stage that found nothing returns an empty frame; the gate judges emptiness
            return pl.DataFrame(schema=self.schema)
        missing = [c for c in self.columns if c not in df.columns]
        extra = [c for c in df.columns if c not in self.columns]
        if missing or extra:
            raise ContractError(self.name, f"columns differ from the contract: missing {missing}, unexpected {extra}")
        if df.height == 0:
            return pl.DataFrame(schema=self.schema)
        try:
            return df.select([pl.col(c).cast(t, strict=True) for c, t in self.columns.items()])
        except Exception as exc:  # polars raises several exception types for casts
            raise ContractError(self.name, f"cannot cast to the contract's types: {exc}") from exc


class ContractError(ValueError):
    def __init__(self, table: str, message: str):
        super().__init__(f"table {table!r}: {message}")
        self.table = table


def _c(name, columns, key, **kw) -> Contract:
    return Contract(name=name, columns=columns, key=key, **kw)


CONTRACTS: dict[str, Contract] = {
    c.name: c
    for c in [
        _c(
            "documents",
            {
                "doc_id": S,
                "source": S,
                "institution": S,
                "lang": S,
                "title": S,
                "doc_type": S,
                "published": S,
                "source_path": S,
                "split": S,
                "blocks": BLOCKS,
            },
            ("doc_id",),
            not_null=("source", "institution", "lang", "title", "split", "blocks"),
            allowed={"source": SOURCES, "split": SPLITS, "lang": ("ko", "en")},
            doc="One row per ingested document; blocks keep the document's structure (paragraphs, sections, tables).",
        ),
        _c(
            "source_qas",
            {
                "qa_id": S,
                "doc_id": S,
                "block_id": S,
                "qa_type": I,
                "qa_kind": S,
                "question": S,
                "answer": S,
                "answer_start": I,
                "clue_text": S,
                "clue_start": I,
                "is_impossible": B,
                "options": pl.List(S),
                "flags": pl.List(S),
            },
            ("qa_id",),
            not_null=("doc_id", "block_id", "qa_kind", "question", "is_impossible"),
            allowed={
                "qa_kind": ("span", "yesno", "table", "multiple_choice", "procedure", "unanswerable", "entailment", "unknown")
            },
            parents={"doc_id": "documents.doc_id"},
            allow_empty=True,
            doc="QA triplets shipped with a source (AI-Hub); offsets are into the cleaned block text.",
        ),
        _c(
            "facts",
            {
                "fact_id": S,
                "source": S,
                "entity": S,
                "entity_id": S,
                "concept": S,
                "label": S,
                "label_en": S,
                "value": S,
                "numeric_value": F,
                "unit": S,
                "decimals": S,
                "period_start": S,
                "period_end": S,
                "instant": B,
                "fiscal_year": I,
                "fiscal_period": S,
                "form": S,
                "filed": S,
                "accession": S,
                "context_id": S,
                "dimensions": S,
                "source_path": S,
            },
            ("fact_id",),
            not_null=("source", "concept", "value", "period_end", "source_path"),
            allowed={"source": SOURCES},
            allow_empty=True,
            doc="XBRL facts (SEC companyfacts/instances, DART instances with Korean labels): numeric ground truth.",
        ),
        _c(
            "quarantine",
            {"source": S, "path": S, "record_id": S, "stage": S, "field": S, "error": S},
            (),
            not_null=("source", "path", "stage", "error"),
            allow_empty=True,
            doc="Inputs that could not be used, with the file, record and field named.",
        ),
        _c(
            "passages",
            {
                "passage_id": S,
                "doc_id": S,
                "block_id": S,
                "source": S,
                "institution": S,
                "lang": S,
                "split": S,
                "doc_type": S,
                "title": S,
                "section_path": S,
                "section_role": S,
                "kind": S,
                "chunk_index": I,
                "chunk_total": I,
                "char_start": I,
                "text": S,
                "token_count": I,
                "tokenizer": S,
            },
            ("passage_id",),
            not_null=("doc_id", "block_id", "source", "institution", "lang", "split", "text", "token_count", "tokenizer"),
            allowed={"kind": ("text", "table"), "split": SPLITS},
            parents={"doc_id": "documents.doc_id"},
        ),
        _c(
            "embeddings",
            {"passage_id": S, "model": S, "dim": I, "vector": pl.List(pl.Float32)},
            ("passage_id",),
            not_null=("model", "vector"),
            parents={"passage_id": "passages.passage_id"},
        ),
        _c(
            "qa_seeds",
            {
                "seed_id": S,
                "passage_id": S,
                "doc_id": S,
                "source": S,
                "institution": S,
                "lang": S,
                "split": S,
                "question": S,
                "answer": S,
                "clue_text": S,
                "clue_start": I,
                "answer_start": I,
                "qa_kind": S,
                "answerable": B,
                "method": S,
                "origin_id": S,
                # provenance of generated seeds (SEC/DART): who wrote it, from which triplets, and the
                # XBRL fact that verifies its number; answer_value is the answer in base units (USD, KRW, %)
                "generator": S,
                "triplet_ids": pl.List(S),
                "fact_id": S,
                "answer_value": F,
                "answer_unit": S,
                "period": S,
            },
            ("seed_id",),
            not_null=("passage_id", "doc_id", "source", "lang", "question", "answer", "answerable", "method", "split"),
            allowed={"method": ("aihub_given", "table_rule", "triplet_qa", "multi_llm_qa"), "split": SPLITS},
            parents={"passage_id": "passages.passage_id"},
        ),
        _c(
            "triplets",
            {
                "triplet_id": S,
                "passage_id": S,
                "head": S,
                "relation": S,
                "tail": S,
                "origin": S,
                "head_type": S,
                "tail_type": S,
                "span": S,
                "value": F,
                "unit": S,
                "period": S,
                "column": S,
                "evidence": S,
                "evidence_start": I,
                "fact_id": S,
                "extractor": S,
            },
            ("triplet_id",),
            not_null=("passage_id", "head", "relation", "tail"),
            parents={"passage_id": "passages.passage_id"},
            allow_empty=True,
            doc="Knowledge-graph triplets (FinReflectKG): numbers merged into VALUE-UNIT-PERIOD tails; "
            "evidence is the passage line stating it, fact_id the XBRL fact that verifies it.",
        ),
        _c(
            "seed_qa_stats",
            {"source": S, "method": S, "funnel": S, "step": I, "metric": S, "value": F},
            ("source", "method", "metric"),
            not_null=("value",),
            allowed={"method": ("triplet_qa", "multi_llm_qa")},
            allow_empty=True,
            doc="Stepwise counts of the seed methods (FinDartBench's stepwise table), compression, "
            "cluster sizes, lexical diversity, numeric disagreement.",
        ),
        _c(
            "retrievals",
            {"seed_id": S, "rank": I, "passage_id": S, "score": F, "is_gold": B, "is_positive": B},
            ("seed_id", "rank"),
            not_null=("passage_id", "score", "is_gold", "is_positive"),
            parents={"seed_id": "qa_seeds.seed_id", "passage_id": "passages.passage_id"},
        ),
        _c(
            "hard_negatives",
            {
                "seed_id": S,
                "passage_id": S,
                "candidate_rank": I,
                "score": F,
                "clue_absent": B,
                "answer_absent": B,
                "unanswerable": B,
                "is_hard_negative": B,
                "judge": S,
            },
            ("seed_id", "passage_id"),
            not_null=("candidate_rank", "score", "clue_absent", "answer_absent", "is_hard_negative"),
            parents={"seed_id": "qa_seeds.seed_id", "passage_id": "passages.passage_id"},
            doc="Every hard-negative candidate with its step-1 (lexical) and step-2 (answerability) verdicts.",
        ),
        _c(
            "dialogues",
            {
                "dialogue_id": S,
                "doc_id": S,
                "source": S,
                "institution": S,
                "lang": S,
                "split": S,
                "n_turns": I,
                "seed_ids": pl.List(S),
                "has_reconfirm": B,
            },
            ("dialogue_id",),
            not_null=("doc_id", "source", "lang", "split", "n_turns"),
            allowed={"split": SPLITS},
            parents={"doc_id": "documents.doc_id"},
        ),
        _c(
            "turns",
            {
                "turn_id": S,
                "dialogue_id": S,
                "turn_index": I,
                "seed_id": S,
                "kind": S,
                "reconfirms_turn": I,
                "standalone_query": S,
                "query": S,
                "response": S,
                "answerable": B,
                "gold_passage_id": S,
                "clue_text": S,
                "answer": S,
                "context": CONTEXT,
                "origin": S,
            },
            ("turn_id",),
            not_null=("dialogue_id", "turn_index", "seed_id", "standalone_query", "query", "response", "answerable", "context"),
            allowed={"kind": ("question", "reconfirm"), "origin": ("seed", "generated")},
            parents={"dialogue_id": "dialogues.dialogue_id", "seed_id": "qa_seeds.seed_id"},
        ),
        _c(
            "dialogue_qc",
            {
                "dialogue_id": S,
                "answerability": F,
                "plausibility": I,
                "correctness": F,
                "diversity": I,
                "coherency": I,
                "passed": B,
                "reasons": pl.List(S),
                "judge": S,
            },
            ("dialogue_id",),
            not_null=("answerability", "plausibility", "correctness", "diversity", "coherency", "passed"),
            parents={"dialogue_id": "dialogues.dialogue_id"},
        ),
        _c(
            "injections",
            {
                "injection_id": S,
                "dialogue_id": S,
                "turn_id": S,
                "turn_index": I,
                "split": S,
                "injector": S,
                "hallu_type": S,
                "hallu_subtype": S,
                "original_response": S,
                "injected_response": S,
                "injected_context": CONTEXT,
                "counterpart_response": S,
                "counterpart_label": S,
                "edit": S,
                "strategy": S,
                "edit_chars": I,
                "edit_words": I,
            },
            ("injection_id",),
            not_null=(
                "dialogue_id",
                "turn_id",
                "turn_index",
                "injector",
                "hallu_type",
                "original_response",
                "injected_response",
                "injected_context",
                "counterpart_response",
                "counterpart_label",
            ),
            allowed={
                "hallu_type": HALLU_TYPES,
                "hallu_subtype": _registered_subtypes,
                "counterpart_label": ("faithful_answer", "true_refusal"),
            },
            parents={"dialogue_id": "dialogues.dialogue_id", "turn_id": "turns.turn_id"},
        ),
        _c(
            "injection_qc",
            {
                "injection_id": S,
                "appropriate": B,
                "naturalness": I,
                "passed": B,
                "reasons": pl.List(S),
                "judge": S,
                "appropriateness": I,
                "verified": B,
                "verify_reasons": pl.List(S),
            },
            ("injection_id",),
            not_null=("appropriate", "naturalness", "passed", "verified"),
            parents={"injection_id": "injections.injection_id"},
        ),
        _c(
            "samples",
            {
                "sample_id": S,
                "pair_id": S,
                "dialogue_id": S,
                "split": S,
                "source": S,
                "institution": S,
                "lang": S,
                "turn_index": I,
                "history": MESSAGES,
                "query": S,
                "standalone_query": S,
                "passages": SAMPLE_PASSAGES,
                "response": S,
                "answerable": B,
                "label_binary": S,
                "label_4class": S,
                "hallu_type": S,
                "hallu_subtype": S,
                "injector": S,
            },
            ("sample_id",),
            not_null=(
                "pair_id",
                "dialogue_id",
                "split",
                "source",
                "query",
                "response",
                "answerable",
                "label_binary",
                "label_4class",
                "passages",
                "history",
            ),
            allowed={
                "split": SPLITS,
                "source": SOURCES,
                "label_binary": LABEL_BINARY,
                "label_4class": LABEL_4CLASS,
                "hallu_type": HALLU_TYPES,
                "hallu_subtype": _registered_subtypes,
            },
            parents={"dialogue_id": "dialogues.dialogue_id"},
        ),
        _c(
            "dataset_stats",
            {"split": S, "metric": S, "slice": S, "value": F},
            ("split", "metric", "slice"),
            not_null=("value",),
        ),
        _c(
            "detections",
            {
                "eval_id": S,
                "detector": S,
                "sample_id": S,
                "score": F,
                "pred_binary": S,
                "pred_4class": S,
                "pred_type": S,
                "rationale": S,
                "detector_version": S,
                "detector_config": S,
            },
            ("eval_id", "detector", "sample_id"),
            not_null=("score", "pred_binary", "pred_4class", "detector_version", "detector_config"),
            allowed={"pred_binary": LABEL_BINARY, "pred_4class": LABEL_4CLASS, "pred_type": HALLU_TYPES},
            parents={"sample_id": "samples.sample_id"},
            doc="One row per (evaluation, detector, sample); detector_config is the JSON of its parameters and backend.",
        ),
        _c(
            "metrics",
            {
                "eval_id": S,
                "dataset": S,
                "dataset_version": S,
                "detector": S,
                "setting": S,
                "slice": S,
                "metric": S,
                "value": F,
                "ci_low": F,
                "ci_high": F,
                "n": I,
            },
            ("eval_id", "detector", "setting", "slice", "metric"),
            not_null=("dataset", "dataset_version", "value", "n"),
            allowed={"setting": METRIC_SETTINGS},
        ),
        _c(
            "confusion",
            {"eval_id": S, "detector": S, "setting": S, "slice": S, "true_label": S, "pred_label": S, "count": I},
            ("eval_id", "detector", "setting", "slice", "true_label", "pred_label"),
            not_null=("count",),
            allowed={"setting": ("binary", "4class", "3class", "type")},
        ),
        _c(
            "detector_tests",
            {
                "eval_id": S,
                "dataset": S,
                "dataset_version": S,
                "test": S,
                "setting": S,
                "slice": S,
                "detector_a": S,
                "detector_b": S,
                "detectors": pl.List(S),
                "n": I,
                "statistic": F,
                "df": I,
                "p_value": F,
                "p_holm": F,
                "a_only_correct": I,
                "b_only_correct": I,
                "net": I,
            },
            ("eval_id", "test", "setting", "slice", "detector_a", "detector_b"),
            not_null=("dataset", "dataset_version", "detectors", "n", "statistic", "p_value"),
            allowed={"test": ("mcnemar_exact", "mcnemar_chi2", "cochran_q", "helped_hurt"), "setting": ("binary", "4class")},
            allow_empty=True,
            doc="Paired significance tests on correctness: McNemar per detector pair (p_holm: Holm-Bonferroni within "
            "test family), Cochran's Q across detectors (detector_a = detector_b = '*'), helped/hurt between two "
            "conditions of one detector (a = baseline, b = condition; b_only_correct = helped, a_only_correct = hurt).",
        ),
        _c(
            "external_samples",
            {
                "sample_id": S,
                "pair_id": S,
                "dialogue_id": S,
                "split": S,
                "source": S,
                "institution": S,
                "lang": S,
                "turn_index": I,
                "history": MESSAGES,
                "query": S,
                "standalone_query": S,
                "passages": SAMPLE_PASSAGES,
                "response": S,
                "answerable": B,
                "label_binary": S,
                "label_4class": S,
                "hallu_type": S,
                "hallu_subtype": S,
                "injector": S,
                "dataset": S,
                "external_id": S,
            },
            ("sample_id",),
            not_null=(
                "pair_id",
                "split",
                "source",
                "query",
                "response",
                "label_binary",
                "label_4class",
                "passages",
                "history",
                "dataset",
                "external_id",
            ),
            allowed={"split": SPLITS, "label_binary": LABEL_BINARY, "label_4class": LABEL_4CLASS, "hallu_type": HALLU_TYPES},
            doc="An external labelled dataset (RAGTruth, HaluEval, JSONL/CSV) in the samples layout; `dataset` names it.",
        ),
        _c(
            "premise_items",
            {
                "item_id": S,
                "base_id": S,
                "cell": S,
                "mechanism": S,
                "premise_kind": S,
                "field": S,
                "source": S,
                "lang": S,
                "doc_id": S,
                "passage_id": S,
                "institution": S,
                "with_evidence": B,
                "context": S,
                "history": MESSAGES,
                "prompt": S,
                "false_claim": S,
                "false_value": S,
                "true_fact": S,
                "true_value": S,
                "source_passage": S,
            },
            ("item_id",),
            not_null=(
                "base_id",
                "cell",
                "mechanism",
                "premise_kind",
                "field",
                "source",
                "lang",
                "doc_id",
                "passage_id",
                "with_evidence",
                "context",
                "history",
                "prompt",
                "false_claim",
                "true_fact",
                "source_passage",
            ),
            allowed={"mechanism": PROBE_MECHANISMS, "premise_kind": ("A1", "A2", "A3")},
            parents={"passage_id": "passages.passage_id"},
            doc="False-premise probe items (HalBench mechanisms, plus P1 pushback): the prompt, the false claim, "
            "the true fact it contradicts and its source passage; with_evidence: the passage is in context.",
        ),
        _c(
            "probe_responses",
            {"response_id": S, "item_id": S, "target": S, "backend": S, "reply": S},
            ("response_id",),
            not_null=("item_id", "target", "backend", "reply"),
            parents={"item_id": "premise_items.item_id"},
            doc="The target roles' replies to the probe items.",
        ),
        _c(
            "probe_references",
            {"reference_id": S, "item_id": S, "cell": S, "panel_role": S, "mode": S, "reply": S},
            ("reference_id",),
            not_null=("item_id", "cell", "panel_role", "mode", "reply"),
            allowed={"mode": ("defer", "hard")},
            parents={"item_id": "premise_items.item_id"},
            allow_empty=True,
            doc="The panel's reference replies (fully deferring / hard rebuttal) that calibrate the axis endpoints.",
        ),
        _c(
            "probe_scores",
            {
                "response_id": S,
                "item_id": S,
                "target": S,
                "cell": S,
                "mechanism": S,
                "field": S,
                "lang": S,
                "with_evidence": B,
                "judge_label": S,
                "judge_rationale": S,
                "embedder": S,
                "axis_score": F,
                "first_sentence_score": F,
                "axis_label": S,
                "sentences": I,
            },
            ("response_id",),
            not_null=("item_id", "target", "cell", "mechanism", "field", "lang", "with_evidence"),
            allowed={"judge_label": PROBE_LABELS, "axis_label": PROBE_LABELS, "mechanism": PROBE_MECHANISMS},
            parents={"response_id": "probe_responses.response_id", "item_id": "premise_items.item_id"},
            doc="Per reply: the embedding-axis score (0 complied .. 1 rebutted; null where the language has no "
            "dense embedder) and its label, and the LLM judge's label (null when the judge call failed).",
        ),
        _c(
            "probe_sentence_scores",
            {"response_id": S, "sentence_index": I, "sentence": S, "raw": F, "score": F, "anchor_score": F},
            ("response_id", "sentence_index"),
            not_null=("sentence", "raw", "score", "anchor_score"),
            parents={"response_id": "probe_scores.response_id"},
            allow_empty=True,
            doc="Per sentence of a reply: the raw axis projection, the score normalised by its cell's endpoints "
            "(averaged into the reply's axis_score) and by the DEFER/HARD anchors (the sentence's stance, for axis_label).",
        ),
        _c(
            "probe_endpoints",
            {
                "cell": S,
                "lang": S,
                "embedder": S,
                "anchor_version": S,
                "defer_end": F,
                "hard_end": F,
                "source": S,
                "n_defer": I,
                "n_hard": I,
            },
            ("cell",),
            not_null=("lang", "embedder", "anchor_version", "defer_end", "hard_end", "source", "n_defer", "n_hard"),
            allowed={"source": ("panel", "anchors")},
            allow_empty=True,
            doc="The DEFER and HARD endpoints of each cell's axis (from the panel's reference replies, or the anchors').",
        ),
        _c(
            "probe_anchors",
            {
                "anchor_version": S,
                "lang": S,
                "pole": S,
                "anchor_index": I,
                "text": S,
                "instruction": S,
                "embedder": S,
                "raw": F,
            },
            ("lang", "pole", "anchor_index"),
            not_null=("anchor_version", "text", "instruction"),
            allowed={"pole": ("defer", "soft", "hard")},
            doc="The anchor library the axis was built from, with each anchor's raw score (null: no embedder).",
        ),
        _c(
            "probe_report_index",
            {"report_id": S, "title": S, "html": S},
            ("report_id",),
            not_null=("title", "html"),
        ),
        _c(
            "report_index",
            {"report_id": S, "title": S, "detectors": pl.List(S), "html": S},
            ("report_id",),
            not_null=("title", "html"),
        ),
    ]
}
