"""The fine-tuned encoder detector (LettuceDetect's token classification) on the packaged MiniLM."""

from __future__ import annotations

import random

import numpy as np
import pytest

from finhallu.detectors import DetectorContext, detector_problem, get_detector
from finhallu.detectors.encoder import Example, _encode, training_examples, unsupported_words

ITEMS = ["revenue", "operating income", "net income", "capital expenditures", "cash dividends", "total assets"]


def _samples(n_pairs: int, seed: int = 0) -> list[dict]:
    """English filing-style pairs: the faithful answer states the figure of the evidence, its pair
    another figure the evidence never gives."""
    rng = random.Random(seed)
    out = []
    for i in range(n_pairs):
        item, year, v = rng.choice(ITEMS), rng.choice([2021, 2022, 2023, 2024]), rng.randint(100, 999)
        evidence = f"In fiscal {year} the company reported {item} of ${v} million, compared with ${v - rng.randint(5, 90)} million a year earlier."
        wrong = v + rng.choice([-1, 1]) * rng.randint(11, 80)
        split = ("train", "train", "train", "valid", "test")[i % 5]
        for label, value in (("faithful", v), ("hallucinated", wrong)):
            out.append(
                {
                    "sample_id": f"s{i}{label[0]}",
                    "pair_id": f"p{i}",
                    "split": split,
                    "label_binary": label,
                    "query": f"What was the {item} in fiscal {year}?",
                    "history": [],
                    "passages": [
                        {"passage_id": "a", "text": evidence},
                        {"passage_id": "b", "text": f"The board met {rng.randint(4, 12)} times during the year."},
                    ],
                    "response": f"The {item} was ${value} million in fiscal {year}.",
                }
            )
    return out


def test_the_edit_is_what_is_labelled_unsupported():
    assert unsupported_words("The rate is 4.1 % a year.", "The rate is 3.1 % a year.") == (0, 0, 0, 1, 0, 0, 0)
    assert unsupported_words("Yes. It also charges a fee.", "Yes.") == (0, 1, 1, 1, 1, 1)  # an added sentence
    assert unsupported_words("The rate is 3.1 %.", "The rate is 3.1 %.") == (1, 1, 1, 1, 1)  # same words, other context
    assert unsupported_words("The rate is 3.1 %.", None) == (1, 1, 1, 1, 1)
    rows = _samples(2)
    examples = training_examples(rows, max_passages=2)
    by_label = {r["label_binary"]: e for r, e in zip(rows, examples)}
    assert sum(by_label["faithful"].labels) == 0 and sum(by_label["hallucinated"].labels) == 1


def test_only_response_tokens_carry_labels_and_the_response_is_read_before_the_evidence():
    from transformers import AutoTokenizer

    from finhallu.detectors.encoder import encoder_folder

    tok = AutoTokenizer.from_pretrained(str(encoder_folder("minilm")))
    ex = Example("The rate is 4.1 % .".split(), ("long evidence " * 200).split(), (0, 0, 0, 1, 0, 0))
    enc, labels, positions = _encode(tok, [ex], max_length=48)
    assert enc["input_ids"].shape[1] == 48  # the evidence was cut, not the response
    labelled = [(t, int(labels[0, t])) for t in range(48) if labels[0, t] != -100]
    assert [t for t, _ in labelled] == [t for t, _ in positions[0]] and len({w for _, w in positions[0]}) == 6
    flagged = {w for (t, w), (_, y) in zip(positions[0], labelled) if y == 1}
    assert flagged == {3}  # the tokens of "4.1" only


@pytest.mark.slow
def test_it_learns_which_figures_the_evidence_holds_and_caches_the_weights(tmp_path):
    det = get_detector("encoder")
    params = det.params({"max_length": 48, "batch_size": 16, "epochs": 3, "lr": 2e-4})  # small: about 30 s on 2 cores
    samples = _samples(200)
    first = det.run(samples, params, DetectorContext(seed=0, cache_dir=tmp_path))
    test = [(s, d) for s, d in zip(samples, first) if s["split"] == "test"]
    assert all(d is None for s, d in zip(samples, first) if s["split"] == "train")  # fit on them, never scored
    y = np.array([s["label_binary"] == "hallucinated" for s, _ in test])
    pred = np.array([d.pred_binary == "hallucinated" for _, d in test])
    assert (y == pred).mean() >= 0.8, (y == pred).mean()  # chance is 0.5: the figure must be matched to the evidence
    flagged = [
        d.rationale.split("unsupported: ")[1]
        for s, d in test
        if s["label_binary"] == "hallucinated" and d.pred_binary == "hallucinated"
    ]
    assert flagged and all(f.startswith("$") for f in flagged)  # the changed figure is what it points at
    again = det.run(samples, params, DetectorContext(seed=0, cache_dir=tmp_path))  # loaded, not trained again
    assert [d.score for d in again if d] == [d.score for d in first if d]
    assert all("hit" in d.rationale for d in again if d) and len(list((tmp_path / "encoder").iterdir())) == 1


def test_a_missing_encoder_is_one_line_before_any_work(monkeypatch, tmp_path):
    monkeypatch.setenv("FINHALLU_ENCODER_PATH", str(tmp_path / "nowhere"))
    problem = detector_problem("encoder", {})
    assert problem and "FINHALLU_ENCODER_PATH" in problem and "\n" not in problem
    monkeypatch.delenv("FINHALLU_ENCODER_PATH")
    assert detector_problem("encoder", {"model": "no-such/encoder"}).startswith("encoder: model 'no-such/encoder'")
    assert detector_problem("encoder", {}) is None  # the packaged MiniLM
