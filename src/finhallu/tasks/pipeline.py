"""The DAG: every stage with its inputs, outputs, config section, roles and operations."""

from __future__ import annotations

from finhallu.tasks import (assemble, chunking, detect, dialogues, embedding, ingest, injection, judge, metrics,
                            report, retrieval, seed_qa)
from finhallu.tasks.base import Stage

STAGES: list[Stage] = [
    Stage("ingest", ingest.run, (), ("documents", "source_qas", "facts", "quarantine"), "ingest",
          description="raw files -> documents"),
    Stage("chunk", chunking.run, ("documents",), ("passages",), "chunk", description="structure-aware passages"),
    Stage("embed", embedding.run, ("passages",), ("embeddings",), "embed", description="passage embeddings"),
    Stage("seed_qa", seed_qa.run, ("documents", "passages", "source_qas", "facts", "embeddings"),
          ("qa_seeds", "triplets", "seed_qa_stats"), "seed_qa", roles=seed_qa.SEED_ROLES,
          operations=("extract_triplets", "reflect_triplets", "generate_triplet_qa", "judge_seed_qa",
                      "generate_questions", "group_questions", "answer_question", "check_factuality",
                      "score_answers_listwise"),
          description="QA seeds"),
    Stage("retrieve", retrieval.run, ("passages", "embeddings", "qa_seeds"), ("retrievals", "hard_negatives"),
          "retrieve", roles=("answerability_judge",), operations=("judge_answerability",),
          description="top-K retrieval and hard negatives"),
    Stage("dialogues", dialogues.run, ("documents", "passages", "qa_seeds", "retrievals", "hard_negatives"),
          ("dialogues", "turns"), "dialogues", roles=("user_llm", "assistant_llm"),
          operations=("choose_next_question", "write_question", "answer_turn", "refuse_turn",
                      "reconfirm_turn"),
          description="faithful multi-turn dialogues"),
    Stage("dialogue_qc", judge.run_dialogue_qc, ("dialogues", "turns", "passages", "qa_seeds"), ("dialogue_qc",),
          "dialogue_qc", roles=("dialogue_judge",), operations=("judge_dialogue",), description="dialogue judge"),
    Stage("inject", injection.run, ("dialogues", "turns", "dialogue_qc", "passages", "qa_seeds", "hard_negatives"),
          ("injections",), "inject", roles=("injector_a", "injector_b", "answerability_judge"),
          operations=("inject_contradictory", "inject_unverifiable", "inject_irrelevance", "inject_false_acceptance",
                      "inject_false_refusal", "perturb_entity", "refuse_turn", "judge_answerability"),
          description="hallucination injection", reads=("retrieve",)),
    Stage("injection_qc", judge.run_injection_qc, ("injections", "turns", "passages"), ("injection_qc",),
          "injection_qc", roles=("injection_judge", "label_verifier"), operations=("judge_injection", "verify_sample"),
          description="injection judge and label verifier"),
    Stage("assemble", assemble.run, ("dialogues", "turns", "injections", "injection_qc", "passages", "dialogue_qc",
                                     "retrievals", "hard_negatives", "qa_seeds", "documents"),
          ("samples", "dataset_stats"), "assemble", description="paired samples, splits, statistics"),
    Stage("detect", detect.run, ("samples",), ("detections",), "detect", roles=("detector_judge",),
          operations=("detect_hallucination", "detect_4class", "detect_type"), description="detectors"),
    Stage("metrics", metrics.run, ("samples", "detections"), ("metrics", "confusion", "detector_tests"), "metrics",
          description="metrics with bootstrap CIs and paired tests"),
]
# The report names the backend of every role that made the benchmark (so it covers them all).
STAGES.append(Stage("report", report.run, ("metrics", "confusion", "detector_tests", "dataset_stats", "detections",
                                           "samples"), ("report_index",), "report",
                    roles=tuple(dict.fromkeys(r for s in STAGES for r in s.roles)), description="HTML report",
                    resources=("tasks/report_template.html.j2", "tasks/report_compare.html.j2")))
STAGES_BY_NAME = {s.name: s for s in STAGES}


def descendants(name: str) -> list[str]:
    """Stages that (transitively) read an output of `name`."""
    produced = set(STAGES_BY_NAME[name].outputs)
    out = []
    for s in STAGES[STAGES.index(STAGES_BY_NAME[name]) + 1:]:
        if produced & set(s.inputs):
            out.append(s.name)
            produced |= set(s.outputs)
    return out
