"""The label verifier's NLI check (injection_qc.verifier_nli_model), where a local NLI model exists.

A second, model-based opinion beside the written rules, on the two leaf families where entailment
decides the label:
- a faithful answer: every sentence is entailed by some evidence passage or the history;
- a Contradictory edit (number, modifier, term, entity, inconsistency): no edited sentence is
  entailed by the evidence or the history (an edit that is still true is no contradiction).
Other leaves get no NLI check (refusals, Unverifiable additions and Irrelevance are judged by the
rules). Reasons read like the rules' ("faithful_answer: nli: ...") so QC records them alike.
"""

from __future__ import annotations

from finhallu.nli_model import Scorer
from finhallu.labelcheck.evidence import new_sentences
from finhallu.text.sentences import split_sentences

CONTRADICTORY_LEAVES = ("number_error", "modifier_change", "financial_term_misunderstanding", "entity_error", "inconsistency")
MAX_PREMISE_CHARS = 2000


def _hypotheses(check: dict) -> tuple[list[str], bool]:
    """(sentences to test, whether each must be entailed) of one verify_sample input."""
    if check["label"] == "faithful_answer":
        return split_sentences(check["response"] or ""), True
    if check["label"] in CONTRADICTORY_LEAVES:
        return new_sentences(check["paired"] or "", check["response"] or ""), False
    return [], False


def nli_reasons(checks: list[dict], scorer: Scorer, threshold: float) -> list[list[str]]:
    """Per check (the verify_sample inputs of labelcheck/): the reasons the NLI model rejects it."""
    jobs: list[tuple[str, str]] = []
    spans: list[tuple[int, list[str], bool, int]] = []
    for c in checks:
        hyps, must = _hypotheses(c)
        premises = [p[:MAX_PREMISE_CHARS] for p in list(c["evidence"]) + [c["history"] or ""] if p and p.strip()]
        spans.append((len(jobs), hyps, must, len(premises)))
        jobs += [(p, h) for h in hyps for p in premises]
    probs = scorer(jobs) if jobs else None
    out = []
    for c, (start, hyps, must, n_prem) in zip(checks, spans):
        reasons = []
        if hyps and n_prem:
            assert probs is not None  # this check's hypotheses and premises put jobs in
            entail = probs[start : start + len(hyps) * n_prem, 0].reshape(len(hyps), n_prem).max(axis=1)
            for h, e in zip(hyps, entail):
                if must and e < threshold:
                    reasons.append(f"{c['label']}: nli: sentence not entailed by the evidence ({e:.2f}): {h[:60]!r}")
                elif not must and e >= threshold:
                    reasons.append(f"{c['label']}: nli: edited sentence still entailed by the evidence ({e:.2f}): {h[:60]!r}")
        out.append(reasons)
    return out
