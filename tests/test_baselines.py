"""Trivial baselines: one feature, direction and threshold learned from train/valid labels only."""

from finhallu.detectors import DetectorContext, get_detector


def _sample(i, split, hallucinated, response, passage="예금자보호 한도는 1억 원입니다."):
    return {
        "sample_id": f"s{i}",
        "split": split,
        "label_binary": "hallucinated" if hallucinated else "faithful",
        "response": response,
        "passages": [{"text": passage}],
        "history": [],
        "query": "한도는?",
    }


def _samples():
    out, i = [], 0
    for split, n in (("train", 20), ("valid", 10), ("test", 10)):
        for k in range(n):
            bad = k % 2 == 1
            # hallucinated: shorter, with words the passage lacks, and not copied from it
            resp = "한도는 5천만 원이며 온라인 가입 시 추가 우대가 있습니다." if bad else "예금자보호 한도는 1억 원입니다. " * 3
            out.append(_sample(i, split, bad, resp.strip()))
            i += 1
    return out


def test_each_baseline_separates_what_its_feature_separates_and_skips_training_rows():
    samples = _samples()
    for name in ("baseline_length", "baseline_novel_tokens", "baseline_verbatim_copy"):
        det = get_detector(name)
        found = det.run(samples, det.params({}), DetectorContext())
        assert all(d is None for s, d in zip(samples, found) if s["split"] == "train"), name
        scored = [(s, d) for s, d in zip(samples, found) if s["split"] == "test"]
        assert all((d.pred_binary == "hallucinated") == (s["label_binary"] == "hallucinated") for s, d in scored), name


def test_a_baseline_without_train_labels_abstains():
    samples = [dict(s, split="test") for s in _samples()]
    det = get_detector("baseline_length")
    assert det.run(samples, det.params({}), DetectorContext()) == [None] * len(samples)
