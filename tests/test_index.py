"""FAISS index: exact search, canonical tie-breaking, persistence, incremental add, ANN choice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import faiss
import numpy as np
import pytest

from finhallu.stages.retrieve import RetrieveConfig
from finhallu.stages.retrieve import index as ix

ROOT = Path(__file__).resolve().parents[1]


def unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def clustered(n: int, m: int, d: int = 32, clusters: int = 20, seed: int = 0, spread: float = 1.2):
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((clusters, d)))
    x = unit(centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, d)) * spread / np.sqrt(d))
    q = unit(x[rng.integers(0, n, m)] + rng.standard_normal((m, d)) * 0.8 * spread / np.sqrt(d))
    return x, q


def make_ids(n: int, prefix: str = "p") -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]


def reference_topk(x: np.ndarray, q: np.ndarray, ids: list[str], k: int) -> tuple[np.ndarray, list[list[str]]]:
    """Independent brute force: full float64 score matrix, sort by (-score, id)."""
    s = q.astype(np.float64) @ x.astype(np.float64).T
    rank = np.argsort(np.argsort(np.array(ids)))
    out_s, out_i = [], []
    for row in s:
        order = np.lexsort((rank, -row))[:k]
        out_s.append(row[order])
        out_i.append([ids[j] for j in order])
    return np.array(out_s), out_i


class BuildCounter:
    def __init__(self, monkeypatch):
        self.calls: list[str] = []
        real = ix._new_index

        def counting(kind, x, cfg):
            self.calls.append(kind)
            return real(kind, x, cfg)

        monkeypatch.setattr(ix, "_new_index", counting)


FLAT = RetrieveConfig(index_kind="flat")


# --------------------------------------------------------------------------- exact search


def test_flat_equals_numpy_brute_force():
    x, q = clustered(3000, 400)
    ids = make_ids(3000)
    idx = ix.build_index(x, ids, model_id="m", cfg=None, cache_dir=None)
    assert (idx.kind, idx.ntotal) == ("flat", 3000)
    scores, got = idx.search(q, 10)
    ref_s, ref_i = reference_topk(x, q, ids, 10)
    assert got == ref_i
    np.testing.assert_allclose(scores, ref_s, rtol=0, atol=1e-6)
    # the NumPy baseline (matrix product + argpartition) ranks identically, bit for bit
    b_scores, b_rows = ix.exact_search_numpy(x, q, 10, ids)
    f_scores, f_rows = idx.search_rows(q, 10)
    assert np.array_equal(b_rows, f_rows) and np.array_equal(b_scores, f_scores)
    assert scores.dtype == np.float32 and scores.shape == (400, 10)


def test_ties_broken_by_id_order():
    rng = np.random.default_rng(3)
    d = 7  # odd: rows of the gathered candidate matrix sit at every alignment
    x = unit(rng.standard_normal((500, d)))
    dup = unit(rng.standard_normal((1, d)))[0]
    slots = rng.choice(500, 40, replace=False)
    x[slots] = dup
    ids = [f"id{int(v):04d}" for v in rng.permutation(10_000)[:500]]
    want = sorted(ids[s] for s in slots)
    idx = ix.build_index(x, ids, model_id="m", cfg=FLAT)
    for k in (10, 40, 45):
        scores, got = idx.search(dup[None, :], k)
        assert got[0][: min(k, 40)] == want[:k]
        assert len(set(scores[0, : min(k, 40)].tolist())) == 1
    _, rows = ix.exact_search_numpy(x, dup[None, :], 10, ids)
    assert [ids[r] for r in rows[0]] == want[:10]
    # a query orthogonal to everything ties all n vectors at 0: the smallest ids win
    scores, got = idx.search(np.zeros((2, d), np.float32), 5)
    assert got == [sorted(ids)[:5]] * 2 and not scores.any()
    # exact rescoring of one (query, vector) pair does not depend on where it sits in a batch
    q = unit(rng.standard_normal((3, d)))
    a = ix._exact_scores(q, x, np.tile(slots, (3, 1)))
    assert np.all(a == a[:, :1])


def test_k_larger_than_index_and_empty_queries():
    x, q = clustered(30, 5)
    idx = ix.build_index(x, make_ids(30), model_id="m")
    s, got = idx.search(q, 100)
    assert s.shape == (5, 30) and all(len(g) == 30 for g in got)
    s, got = idx.search(np.zeros((0, x.shape[1]), np.float32), 10)
    assert s.shape == (0, 10) and got == []


# --------------------------------------------------------------------------- persistence


def test_second_call_loads_instead_of_rebuilding(tmp_path, monkeypatch):
    counter = BuildCounter(monkeypatch)
    x, q = clustered(1500, 100)
    ids = make_ids(1500)
    first = ix.build_index(x, ids, model_id="nlpai-lab/KURE-v1", cfg=FLAT, cache_dir=tmp_path, meta={"passages": "v7"})
    assert first.origin == "built" and counter.calls == ["flat"]
    assert first.path.parent == tmp_path / "index" / "nlpai-lab_KURE-v1" and len(first.path.name) == 16
    man = json.loads((first.path / "manifest.json").read_text())
    for key in ("model_id", "kind", "params", "n", "dim", "ids", "ids_hash", "faiss_version", "created_at", "content_hash"):
        assert key in man
    assert man["model_id"] == "nlpai-lab/KURE-v1" and man["n"] == 1500 and man["dim"] == 32
    assert man["ids"] == ids and man["meta"] == {"passages": "v7"} and man["faiss_version"] == faiss.__version__
    assert (first.path / "index.faiss").is_file()

    again = ix.build_index(x, ids, model_id="nlpai-lab/KURE-v1", cfg=FLAT, cache_dir=tmp_path)
    assert again.origin == "loaded" and counter.calls == ["flat"] and again.path == first.path
    # same content in another order: same hash, loaded, same answers
    perm = np.random.default_rng(1).permutation(1500)
    shuffled = ix.build_index(x[perm], [ids[i] for i in perm], model_id="nlpai-lab/KURE-v1", cfg=FLAT, cache_dir=tmp_path)
    assert shuffled.origin == "loaded" and shuffled.path == first.path and counter.calls == ["flat"]
    s1, i1 = first.search(q, 10)
    s2, i2 = shuffled.search(q, 10)
    assert i1 == i2 and np.array_equal(s1, s2)
    # another model id or recipe never shares the entry
    other = ix.build_index(x, ids, model_id="other", cfg=FLAT, cache_dir=tmp_path)
    assert other.origin == "built" and other.path.parent.name == "other"


def test_incremental_flat_equals_full_rebuild(tmp_path, monkeypatch):
    x, q = clustered(2600, 300)
    ids = make_ids(2600)
    rng = np.random.default_rng(5)
    base = np.sort(rng.choice(2600, 2000, replace=False))
    ix.build_index(x[base], [ids[i] for i in base], model_id="m", cfg=FLAT, cache_dir=tmp_path)
    counter = BuildCounter(monkeypatch)
    perm = rng.permutation(2600)  # the caller's order need not match anything
    xs, ids_s = x[perm], [ids[i] for i in perm]
    inc = ix.build_index(xs, ids_s, model_id="m", cfg=FLAT, cache_dir=tmp_path)
    assert inc.origin == "incremental" and counter.calls == [] and inc.ntotal == 2600
    man = json.loads((inc.path / "manifest.json").read_text())
    assert man["origin"] == "incremental" and man["base"] is not None and len(man["ids"]) == 2600
    full = ix.build_index(xs, ids_s, model_id="m", cfg=FLAT)  # fresh, no cache
    for k in (1, 10, 50):
        s_inc, i_inc = inc.search(q, k)
        s_full, i_full = full.search(q, k)
        assert i_inc == i_full and np.array_equal(s_inc, s_full)
        assert np.array_equal(inc.search_rows(q, k)[1], full.search_rows(q, k)[1])
    assert ix.build_index(xs, ids_s, model_id="m", cfg=FLAT, cache_dir=tmp_path).origin == "loaded"


def test_incremental_ivf_equals_rebuild_with_same_quantizer(tmp_path, monkeypatch):
    cfg = RetrieveConfig(index_kind="ivf", ivf_nprobe=4)
    x, q = clustered(3600, 300, seed=2)
    ids = make_ids(3600)
    saved = ix.build_index(x[:3000], ids[:3000], model_id="m", cfg=cfg, cache_dir=tmp_path)
    assert saved.params["trained_n"] == 3000
    counter = BuildCounter(monkeypatch)
    inc = ix.build_index(x, ids, model_id="m", cfg=cfg, cache_dir=tmp_path)
    assert inc.origin == "incremental" and counter.calls == [] and inc.params == saved.params
    # rebuild: the same trained centroids, all vectors added at once in the caller's order
    fresh = faiss.clone_index(inc.index)
    fresh.reset()
    ix._ivf_add(fresh, x)
    rebuilt = ix.SearchIndex(fresh, "ivf", ids, np.arange(3600), x, dict(inc.params), dict(inc.search_params))
    s1, i1 = inc.search(q, 10)
    s2, i2 = rebuilt.search(q, 10)
    assert i1 == i2 and np.array_equal(s1, s2)
    assert [fresh.invlists.list_size(c) for c in range(fresh.nlist)] == [
        inc.index.invlists.list_size(c) for c in range(inc.index.nlist)
    ]
    # grown past ivf_retrain_growth x the trained size: retrained from scratch
    grown = ix.build_index(x, ids, model_id="m2", cfg=cfg, cache_dir=tmp_path)
    assert grown.origin == "built"
    strict = cfg.model_copy(update={"ivf_retrain_growth": 1.1})
    ix.build_index(x[:3000], ids[:3000], model_id="m3", cfg=strict, cache_dir=tmp_path)
    assert ix.build_index(x, ids, model_id="m3", cfg=strict, cache_dir=tmp_path).origin == "built"


def test_incremental_hnsw_within_documented_tolerance(tmp_path):
    cfg = RetrieveConfig(index_kind="hnsw", hnsw_m=16, hnsw_ef_construction=40, hnsw_ef_search=64)
    x, q = clustered(3000, 300, seed=4)
    ids = make_ids(3000)
    ix.build_index(x[:2500], ids[:2500], model_id="m", cfg=cfg, cache_dir=tmp_path)
    inc = ix.build_index(x, ids, model_id="m", cfg=cfg, cache_dir=tmp_path)
    assert inc.origin == "incremental"
    full = ix.build_index(x, ids, model_id="m", cfg=cfg)
    exact = ix.build_index(x, ids, model_id="m", cfg=FLAT).search_rows(q, 10)[1]
    r_inc, r_full = inc.search_rows(q, 10)[1], full.search_rows(q, 10)[1]
    assert ix.recall_at_k(r_inc, r_full) >= 0.95
    assert ix.recall_at_k(r_inc, exact) >= 0.9 and ix.recall_at_k(r_full, exact) >= 0.9


def test_removed_or_changed_ids_force_rebuild(tmp_path, monkeypatch):
    x, _ = clustered(1200, 1)
    ids = make_ids(1200)
    ix.build_index(x[:1000], ids[:1000], model_id="m", cfg=FLAT, cache_dir=tmp_path)
    counter = BuildCounter(monkeypatch)
    keep = list(range(10, 1200))  # 10 removed, 200 added
    removed = ix.build_index(x[keep], [ids[i] for i in keep], model_id="m", cfg=FLAT, cache_dir=tmp_path)
    assert removed.origin == "built" and counter.calls == ["flat"]
    changed = x.copy()
    changed[500] = unit(changed[500:501] + 0.1)[0]  # in every saved index
    again = ix.build_index(changed, ids, model_id="m", cfg=FLAT, cache_dir=tmp_path)
    assert again.origin == "built" and counter.calls == ["flat", "flat"]
    # an unchanged superset still grows from the largest saved subset
    assert ix.build_index(x, ids, model_id="m", cfg=FLAT, cache_dir=tmp_path).origin == "incremental"


@pytest.mark.parametrize("damage", ["garbage", "truncated_index", "wrong_manifest", "missing_index"])
def test_corrupt_cache_entry_is_rebuilt(tmp_path, damage):
    x, q = clustered(800, 20)
    ids = make_ids(800)
    first = ix.build_index(x, ids, model_id="m", cfg=FLAT, cache_dir=tmp_path)
    man_path, idx_path = first.path / "manifest.json", first.path / "index.faiss"
    if damage == "garbage":
        man_path.write_text("{not json")
    elif damage == "truncated_index":
        idx_path.write_bytes(idx_path.read_bytes()[:100])
    elif damage == "wrong_manifest":
        man = json.loads(man_path.read_text())
        man["ids"] = man["ids"][:-1]
        man_path.write_text(json.dumps(man))
    else:
        idx_path.unlink()
    second = ix.build_index(x, ids, model_id="m", cfg=FLAT, cache_dir=tmp_path)
    assert second.origin == "built" and second.path == first.path
    (s1, i1), (s2, i2) = first.search(q, 5), second.search(q, 5)
    assert i1 == i2 and np.array_equal(s1, s2)
    assert ix.build_index(x, ids, model_id="m", cfg=FLAT, cache_dir=tmp_path).origin == "loaded"
    assert not [p for p in first.path.parent.iterdir() if p.name.startswith(".")]


def test_concurrent_writers_of_the_same_content(tmp_path):
    x, q = clustered(2000, 20)
    ids = make_ids(2000)
    results, errors = [], []

    def worker():
        try:
            results.append(ix.build_index(x, ids, model_id="m", cfg=FLAT, cache_dir=tmp_path))
        except Exception as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    root = tmp_path / "index" / "m"
    assert [p.name for p in root.iterdir()] == [results[0].path.name]
    assert ix._load(results[0].path, results[0].content_hash) is not None
    # the loser of a rename race keeps the winner's valid copy ...
    index, man = ix._load(results[0].path)
    assert ix._save(results[0].path, index, {k: v for k, v in man.items() if k != "index_sha256"}) is False
    # ... and replaces an invalid one
    (results[0].path / "index.faiss").write_bytes(b"junk")
    assert ix._save(results[0].path, index, man) is True
    assert ix.build_index(x, ids, model_id="m", cfg=FLAT, cache_dir=tmp_path).origin == "loaded"


# --------------------------------------------------------------------------- ANN


def test_ann_chosen_above_threshold_with_recall_measured():
    x, q = clustered(4000, 300, d=32, clusters=40, seed=6)
    ids = make_ids(4000)
    cfg = RetrieveConfig(ann_threshold=1000)
    assert ix.resolve_kind(999, cfg) == "flat" and ix.resolve_kind(1000, cfg) == "ivf"
    assert ix.build_index(x[:500], ids[:500], model_id="m", cfg=cfg).kind == "flat"
    ivf = ix.build_index(x, ids, model_id="m", cfg=cfg)
    assert ivf.kind == "ivf" and ivf.params["nlist"] == ix.ivf_nlist(4000, cfg) == 102  # min(4*sqrt(n), n/39)
    hnsw = ix.build_index(x, ids, model_id="m", cfg=cfg.model_copy(update={"ann_kind": "hnsw"}))
    assert hnsw.kind == "hnsw"
    assert ix.build_index(x, ids, model_id="m", cfg=cfg.model_copy(update={"index_kind": "flat"})).kind == "flat"
    for idx in (ivf, hnsw):
        rep = ix.measure_recall_loss(None, q, 10, cfg, index=idx)
        assert rep.kind == idx.kind and 0.9 < rep.recall <= 1.0 and rep.loss == pytest.approx(1 - rep.recall)
    rep = ix.measure_recall_loss(x, q, 10, cfg.model_copy(update={"ann_kind": "hnsw"}))
    assert rep.kind == "hnsw" and rep.recall > 0.9 and rep.build_s > 0
    flat = ix.build_index(x, ids, model_id="m", cfg=FLAT)
    assert ix.measure_recall_loss(None, q, 10, index=flat).recall == 1.0


def test_ivf_short_result_lists_are_padded():
    x, q = clustered(400, 10, seed=8)
    cfg = RetrieveConfig(index_kind="ivf", ivf_nlist=8, ivf_nprobe=1)
    idx = ix.build_index(x, make_ids(400), model_id="m", cfg=cfg)
    scores, got = idx.search(q, 200)
    _, rows = idx.search_rows(q, 200)
    for s, g, r in zip(scores, got, rows):
        assert len(g) == int(np.isfinite(s).sum()) == int((r >= 0).sum()) <= 200
        assert np.all(np.isneginf(s[len(g) :]))


def _fingerprint(kind: str) -> str:
    import hashlib

    x, q = clustered(2500, 200, seed=9)
    cfg = RetrieveConfig(index_kind=kind, hnsw_m=16, hnsw_ef_construction=40)
    idx = ix.build_index(x, make_ids(2500), model_id="m", cfg=cfg)
    s, r = idx.search_rows(q, 10)
    h = hashlib.sha256(faiss.serialize_index(idx.index).tobytes())
    h.update(s.tobytes() + r.tobytes())
    return h.hexdigest()


def test_ann_builds_are_deterministic_across_runs_and_threads():
    prints = {}
    for kind in ("ivf", "hnsw"):
        with ix._faiss_threads(1):
            one = _fingerprint(kind)
        with ix._faiss_threads(2):
            two = _fingerprint(kind)
        assert one == two
        prints[kind] = one
    code = "import sys; sys.path.insert(0, 'tests'); import test_index as t; print(t._fingerprint('ivf'), t._fingerprint('hnsw'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [prints["ivf"], prints["hnsw"]]
