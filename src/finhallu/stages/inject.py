"""inject: passing dialogues -> `injections` (exactly one injected turn per base dialogue).

Sources: the test split is injected by two sources (the configured injectors; each dialogue by
one of them, shared out evenly by seeded per-dialogue draws), train and valid by the first. Each injector is an LLM role whose
operations (`inject_<type>`, `perturb_entity`, `refuse_turn`) run on its provider; offline both
are rule configurations (own seeds and phrasing banks).

Balance: per split, every (type, subtype) leaf the split can carry first gets
`min_per_subtype` dialogues (rarest leaf first; when the split has two dialogues per leaf); each
type's share of the rest is its target share (`inject.type_weights`, `inject.unanswerable_share`;
what a type's dialogues cannot carry goes to the others), split evenly over its subtypes; the
dialogues are matched to leaves by deferred acceptance on seeded per-dialogue draws (the most
constrained dialogues first at each leaf), then moved along the shortest chains that fill leaves
still short. Every draw is keyed by the dialogue's id, not its position, so adding documents
leaves the other dialogues' labels as they were, but for the few a new one displaces. Feasibility and
the target turn come from the rule-based injectors: turns with a history (turn >= 2) come
first, then turns ranked by how well they suit the type (Contradictory: dense in numbers or
financial terms; Inconsistency: turns restating earlier statements; Irrelevance: conditions or
multi-aspect answers; reconfirm turns are eligible), equally suited turns in a seeded random
order; the first turn the rules can edit is the target; the operation then edits it (an LLM
backend may decline, and the next turn is tried, for at most `inject.max_attempts` calls per
dialogue; a dialogue given up is counted, by reason, in a WARNING of the run's log). Dialogues
are injected concurrently when the injectors are remote models (llm.parallel).
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
import math
import random
import threading
from collections import Counter, deque
from pathlib import Path

import polars as pl

from finhallu.codeversion import code_hash
from finhallu.result_cache import CACHE_FILE, ResultCache, item_digest, open_result_cache
from finhallu.text import sentences
from finhallu.text.phrases import prefetch_noun_phrases
from finhallu.llm.parallel import map_items
from finhallu.llm.router import LLMRouter
from finhallu.taxonomy import SPLITS
from finhallu.answerability import DEFERRED, JUDGE, HardNegativeConfig, judge_kwargs, judge_lazily
from finhallu.schemas.rows import ContextEntry, InjectionsRow
from finhallu.schemas.rules import Rule
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages.base import Frames, Stage, StageContext, hand_back, typed_rows_frame, shared_rows
from finhallu.injectors import (
    INJECTORS,
    Injected,
    TurnView,
    entities,
    fabricate,
    find_leaf,
    load_injectors,
    minimal_edit_subtypes,
    subtypes_by_type,
)
from finhallu.injectors.false_acceptance import MIN_HARD_NEGATIVES
from finhallu.injectors.ops import InjectOut
from finhallu.injectors.verify import edit_distance, word_edit_distance
from typing import Any, Literal, cast, get_args
from pydantic import Field, model_validator
from finhallu.schemas.section import Section


EntityStrategy = Literal["embedding", "instructed"]
EntitySelection = Literal["uniform", "theme", "position"]


class InjectConfig(Section):
    types: list[str] = Field(
        default_factory=lambda: ["contradictory", "unverifiable", "irrelevance", "false_acceptance", "false_refusal"]
    )
    # Two injectors for the test split (the paper uses two LLMs); offline both are rule
    # configurations with different seeds and phrasing banks.
    injectors: list[str] = Field(default_factory=lambda: ["rules_a", "rules_b"])
    # The LLM role of each injector, by position (default injector_a, injector_b).
    injector_roles: list[str] = Field(default_factory=lambda: ["injector_a", "injector_b"])
    # entity_error: replacement strategy and mention selection, drawn per dialogue from these lists.
    entity_strategies: list[EntityStrategy] = Field(default_factory=lambda: list(get_args(EntityStrategy)))
    entity_selections: list[EntitySelection] = Field(default_factory=lambda: list(get_args(EntitySelection)))
    entity_noise_sigma: float = Field(0.5, ge=0.0)  # norm of the Gaussian noise on a unit entity embedding
    # Every subtype a split can carry is injected at least this often there before types are balanced.
    min_per_subtype: int = Field(1, ge=0)
    # A minimal-edit subtype's output that changes more words than this is passed over for the
    # dialogue's next candidate (the QC judge applies its own limit to what gets through).
    max_minimal_edit_words: int = Field(4, ge=1)
    # Injector calls per dialogue before it is given up (its candidates in order: the best-suited
    # turn of each chosen subtype first). A model that keeps missing must not cost 20 calls a dialogue.
    max_attempts: int = Field(4, ge=1, le=50)
    # Target share of each type among injected dialogues (relative weights; types left out weigh
    # 1, a zero weight turns the type off). The demo stays balanced; `paper` sets K-FinHallu's.
    type_weights: dict[str, float] = Field(default_factory=dict)
    # Share of unanswerable samples: False Acceptance is the only unanswerable hallucination (its
    # counterpart a True Refusal), so this fixes its share and the other weights share the rest.
    unanswerable_share: float | None = Field(None, ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _check_weights(self):
        for t in self.types:
            INJECTORS.get(t)  # UnknownPluginError (a ValueError) names the registered types
        unknown = sorted(set(self.type_weights) - set(self.types))
        if unknown:
            raise ValueError(f"inject.type_weights names types not in inject.types: {unknown}")
        if any(w < 0 for w in self.type_weights.values()):
            raise ValueError("inject.type_weights must be non-negative")
        if sum(self.weights().values()) <= 0:
            raise ValueError("inject.type_weights must leave some type a positive weight")
        if self.unanswerable_share is not None and "false_acceptance" not in self.types:
            raise ValueError("inject.unanswerable_share needs false_acceptance in inject.types")
        return self

    def weights(self) -> dict[str, float]:
        """Each type's target share (summing to 1), unanswerable_share applied."""
        raw = {t: float(self.type_weights.get(t, 1.0)) for t in self.types}
        share = self.unanswerable_share
        if share is not None:
            rest = sum(w for t, w in raw.items() if t != "false_acceptance")
            if rest <= 0:
                return {t: float(t == "false_acceptance") for t in raw}
            raw = {t: (share if t == "false_acceptance" else (1 - share) * w / rest) for t, w in raw.items()}
        total = sum(raw.values())
        return {t: w / total for t, w in raw.items()} if total > 0 else raw


def _views(dialogue: dict, turns: list[dict], data: dict, variant: str) -> list[TurnView]:
    passages, seeds, negs = data["passages"], data["seeds"], data["negatives"]
    views = []
    for i, t in enumerate(turns):
        seed = seeds[t["seed_id"]]
        ids = [c["passage_id"] for c in t["context"]]
        views.append(
            TurnView(
                turn=t,
                history=turns[:i],
                lang=dialogue["lang"],
                evidence=[passages[p]["text"] for p in ids],
                gold_text=passages[t["gold_passage_id"]]["text"] if t["gold_passage_id"] else None,
                other_context=[data["context_entries"][p] for p in ids if p != t["gold_passage_id"]],
                sibling_seeds=[s for s in data["by_doc"].get(dialogue["doc_id"], []) if s["seed_id"] != seed["seed_id"]],
                hard_negatives=negs.planned(t["seed_id"]),
                seed=seed,
                doc_id=dialogue["doc_id"],
                variant=variant,
                entities=data["entities"].get((dialogue["split"], dialogue["lang"])),
                claims=data["claims"].get((dialogue["split"], dialogue["source"], dialogue["lang"])),
            )
        )
    return views


class _FalseAcceptanceNegatives:
    """P_n for False Acceptance: a seed's first K hard negatives. Seeds judged in retrieve have them;
    an answerable seed's candidates (`retrieve.judge_answerable_seeds: on_demand`) are judged here,
    the first time an attempt needs them, in rank order and lazily as retrieve would. Until then
    the turn plans with its first K step-1 candidates."""

    def __init__(
        self, hard_negatives: pl.DataFrame, seeds: dict, passages: dict, llm: LLMRouter, rcfg: HardNegativeConfig, k: int
    ):
        self.seeds, self.passages, self.k, self.llm, self.rcfg = seeds, passages, k, llm, rcfg
        self.judged: dict[str, list[str]] = {}
        self.pending: dict[str, list[dict]] = {}  # deferred candidate rows, rank order
        # Only the rows used below reach Python (at 3,060 documents: 70,000 of 987,000 candidates).
        wanted = hard_negatives.filter((pl.col("judge") == DEFERRED) | pl.col("is_hard_negative"))
        for r in wanted.sort("seed_id", "candidate_rank").iter_rows(named=True):
            sid = r["seed_id"]
            if r["judge"] == DEFERRED:
                self.pending.setdefault(sid, []).append(r)
            elif r["is_hard_negative"] and len(self.judged.setdefault(sid, [])) < k:
                self.judged[sid].append(r["passage_id"])
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def planned(self, seed_id: str) -> list[str]:
        if seed_id in self.pending:
            return [row["passage_id"] for row in self.pending[seed_id][: self.k]]
        return self.judged.get(seed_id, [])

    def confirmed(self, seed_id: str) -> list[str]:
        with self._guard:
            lock = self._locks.setdefault(seed_id, threading.Lock())
        with lock:  # dialogues run concurrently; a seed is judged once
            rows = self.pending.pop(seed_id, None)
            if rows is not None:
                seed = self.seeds[seed_id]
                asked = [(row, judge_kwargs(seed, self.passages[row["passage_id"]]["text"], self.rcfg)) for row in rows]
                judge_lazily(asked, self.llm, self.llm.backend(JUDGE), self.k, True, self.rcfg.judge_round_margin)
                self.judged[seed_id] = [row["passage_id"] for row in rows if row["is_hard_negative"]][: self.k]
        return self.judged.get(seed_id, [])


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big") % (2**31)


class _Injector:
    """One injection source: its name (the `injector` column), LLM role and rule variant."""

    def __init__(
        self,
        name: str,
        role: str,
        variant: str,
        llm: LLMRouter,
        cfg: InjectConfig,
        registry: dict,
        negatives: _FalseAcceptanceNegatives,
    ):
        self.name, self.role, self.variant, self.llm, self.cfg, self.registry = name, role, variant, llm, cfg, registry
        self.negatives = negatives

    def entity_plan(self, did: str) -> tuple[str, str]:
        rng = random.Random(_seed(did, self.name, "entity"))
        return rng.choice(self.cfg.entity_strategies), rng.choice(self.cfg.entity_selections)

    def rules(self, view: TurnView, htype: str, subtype: str | None, seed: int, did: str) -> Injected | None:
        """What the rules can make of this turn (feasibility, and the offline result itself)."""
        rng = random.Random(seed)
        if subtype == "entity_error":
            strategy, selection = self.entity_plan(did)
            return entities.perturb(view, rng, strategy, selection, self.cfg.entity_noise_sigma)
        return self.registry[htype].inject(view, subtype, rng)

    def call(self, view: TurnView, htype: str, subtype: str | None, seed: int, did: str) -> Injected | None:
        """The injection through the role's provider (offline: the rules backend)."""
        if subtype == "entity_error":
            strategy, selection = self.entity_plan(did)
            instruct = lambda **kw: self.llm.call(self.role, "perturb_entity", **kw)  # noqa: E731
            return entities.perturb(view, random.Random(seed), strategy, selection, self.cfg.entity_noise_sigma, instruct)
        if htype == "false_acceptance" and view.turn["answerable"]:
            # the turn planned with its candidates; the context it gets is what the judge confirms
            confirmed = self.negatives.confirmed(view.turn["seed_id"])
            if len(confirmed) < MIN_HARD_NEGATIVES:
                return None
            view = dataclasses.replace(view, hard_negatives=confirmed)
        leaf = find_leaf(htype, subtype)
        assert leaf is not None, f"{htype}/{subtype} is not a registered leaf"  # the leaves come from the registry
        instruction = leaf.instruction
        out: InjectOut = self.llm.call(
            self.role,
            f"inject_{htype}",
            view=view.payload(),
            subtype=subtype,
            instruction=instruction.get(view.lang, instruction["en"]),
            lang=view.lang,
            rng_seed=seed,
        )
        if out is None or not out.response:  # None: the call failed for good (recorded in llm_calls)
            return None
        if out.subtype is not None and out.subtype != subtype:
            return None  # an injector that made another subtype than asked: its label cannot be trusted
        # False Acceptance on an answerable turn: P_n becomes the hard negatives (structural, whatever the backend says)
        replace = out.replace_context or (htype == "false_acceptance" and view.turn["answerable"])
        context = [{"passage_id": p, "role": "hard_negative"} for p in view.hard_negatives] if replace else None
        counterpart = out.counterpart
        if htype == "false_acceptance" and view.turn["answerable"] and not counterpart:
            refusal = self.llm.call(
                self.role, "refuse_turn", question=view.turn["standalone_query"], lang=view.lang, rng_seed=seed
            )
            if refusal is None:
                return None
            counterpart = refusal.text
        return Injected(
            out.subtype if out.subtype is not None else subtype,
            out.response,
            out.edit,
            context,
            counterpart,
            out.counterpart_label,
            out.strategy,
        )


def _leaves(cfg: InjectConfig, registry: dict) -> list[tuple[str, str | None]]:
    return [(t, s) for t in cfg.types for s in (registry[t].subtypes or (None,))]


class _FeasibilityMemo:
    """What `_feasible` found per (dialogue, injector, leaf) -- the turns in rank order and the one the
    rules can edit -- kept in the home's result cache (finhallu.result_cache) under a digest of all
    the rules read: the turn views as plain data (`TurnView.payload`), the split's entity inventory
    for entity_error and its claim inventory for fabricated_detail (the only leaves that read them),
    the inject section and the code. A rebuild after new documents ranks and tries again only the dialogues whose
    inputs changed (planning was ~70 % of the stage: the rules run per leaf and turn)."""

    def __init__(self, cache: ResultCache, cfg: InjectConfig, entity_digests: dict[tuple[str, str], bytes]):
        self.cache, self.entity_digests = cache, entity_digests
        self.settings = json.dumps(cfg.model_dump(mode="json"), sort_keys=True)

    def keys(self, views: list[TurnView], leaves, inj: _Injector, did: str, split: str) -> dict[tuple, bytes]:
        lang = views[0].lang if views else ""
        shared = item_digest((self.settings, did, inj.name, inj.variant, [v.payload(donors=False) for v in views]))
        inventory = {
            "entity_error": self.entity_digests.get((split, lang), b""),
            "fabricated_detail": views[0].claims.digest() if views and views[0].claims is not None else b"",
        }
        return {(htype, sub): item_digest((shared, htype, sub, inventory.get(sub or "", b""))) for htype, sub in leaves}


def _feasible(
    views: list[TurnView], leaves, inj: _Injector, did: str, memo: _FeasibilityMemo | None = None, split: str = ""
) -> dict[tuple, list[tuple[TurnView, int]]]:
    """Per leaf, the turns the rules can edit, best-suited first (empty: the leaf does not fit).
    Turns with a history come first (a sample at turn 1 tests no multi-turn reading), then by
    how well they suit the type; equally suited turns in a seeded random order, so that ties
    do not all go to the earliest turn. `memo`: results of earlier builds for the same inputs."""
    keys = memo.keys(views, leaves, inj, did, split) if memo is not None else {}
    known = memo.cache.get(list(keys.values())) if memo is not None else {}
    fresh = []
    out = {}
    for htype, sub in leaves:
        found = known.get(keys[(htype, sub)]) if keys else None
        if found is None:
            found = _rank_and_try(views, htype, sub, inj, did)
            if keys:
                fresh.append((keys[(htype, sub)], found))
        ranked, target = found
        if target is not None:
            seed = lambda i: _seed(did, inj.name, htype, sub, views[i].turn["turn_index"])  # noqa: E731
            out[(htype, sub)] = [(views[target], seed(target))] + [(views[i], seed(i)) for i in ranked if i != target]
    if memo is not None:
        memo.cache.put(fresh)
    return out


def _rank_and_try(views: list[TurnView], htype: str, sub: str | None, inj: _Injector, did: str) -> tuple[list[int], int | None]:
    """The views' positions in rank order for a leaf, and the first one the rules can edit (None: none)."""
    prefers = inj.registry[htype].prefers
    tie = random.Random(_seed(did, inj.name, htype, sub, "tie"))
    keyed = [((v.turn["turn_index"] < 2, -round(prefers(v, sub), 6), tie.random()), i) for i, v in enumerate(views)]
    ranked = [i for _, i in sorted(keyed, key=lambda kv: kv[0])]
    for i in ranked:
        v = views[i]
        seed = _seed(did, inj.name, htype, sub, v.turn["turn_index"])
        if _usable(inj.rules(v, htype, sub, seed, did), v, inj.cfg.max_minimal_edit_words):
            return ranked, i  # the best-suited editable turn is the target; later ones are fallbacks for an LLM
    return ranked, None


def _unit(*parts: object) -> float:
    """A uniform draw in (0, 1) fixed by its key: a dialogue's draws never depend on the others."""
    h = int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")
    return (h + 0.5) / 2**64


def _apportion(total: int, weights: dict, limits: dict) -> dict:
    """`total` split by `weights` (largest remainders), no key above its limit: what a key cannot
    hold goes to the others in proportion (water-filling)."""
    caps = {k: 0 for k in weights}
    open_ = {k for k, w in weights.items() if w > 0 and limits[k] > 0}
    left = total
    while left > 0 and open_:
        wsum = sum(weights[k] for k in open_)
        quota = {k: left * weights[k] / wsum for k in open_}
        full = [k for k in open_ if caps[k] + quota[k] >= limits[k]]
        if full:
            for k in full:
                left -= limits[k] - caps[k]
                caps[k] = limits[k]
                open_.discard(k)
            continue
        floors = {k: int(q) for k, q in quota.items()}
        for k, f in floors.items():
            caps[k] += f
        ranked = sorted(open_, key=lambda k: (floors[k] - quota[k], str(k)))
        for k in ranked[: left - sum(floors.values())]:
            caps[k] += 1
        left = 0
    return caps


def _deferred_acceptance(prefs: dict[str, list], priority, caps: dict) -> dict[str, Any]:
    """Dialogue-proposing deferred acceptance (Gale-Shapley, many to one): each dialogue asks its
    leaves in preference order, a full leaf keeps the dialogues of best (lowest) priority. The
    result depends on the preferences and capacities only, not on any processing order, and a
    new dialogue moves only the dialogues of its rejection chain. Unmatched dialogues are left out."""
    held: dict[Any, list] = {lf: [] for lf in caps}  # max-heaps of (-priority, dialogue id)
    asked = dict.fromkeys(prefs, 0)
    free = sorted(prefs, reverse=True)
    while free:
        did = free.pop()
        if asked[did] >= len(prefs[did]):
            continue
        leaf = prefs[did][asked[did]]
        asked[did] += 1
        if caps.get(leaf, 0) <= 0:
            free.append(did)
            continue
        heapq.heappush(held[leaf], (tuple(-x for x in priority(did, leaf)), did))
        if len(held[leaf]) > caps[leaf]:
            free.append(heapq.heappop(held[leaf])[1])
    return {did: leaf for leaf, heap in held.items() for _, did in heap}


def _share_out(dialogue_ids: list[str], names: list[str], salt: tuple) -> dict[str, str]:
    """Each dialogue's injector: shared out (none above ceil(n / injectors), so two injectors'
    counts differ by at most one) and stable under additions (a new dialogue moves at most one
    other): each dialogue draws its preferred injector, an injector over its share keeps the
    dialogues of best draw."""
    if len(names) == 1:
        return dict.fromkeys(dialogue_ids, names[0])
    prefs = {did: sorted(names, key=lambda n: _unit(salt, did, n)) for did in dialogue_ids}
    cap = -(-len(dialogue_ids) // len(names))
    return _deferred_acceptance(prefs, lambda did, _: (_unit(salt, did),), dict.fromkeys(names, cap))


def _fill_by_moves(chosen: dict[str, tuple], prefs: dict[str, list], caps: dict, unmatched: list[str]) -> None:
    """Each dialogue deferred acceptance left out placed by the shortest chain of moves that ends
    at a leaf with room (an augmenting path over leaves, breadth first): a dialogue feasible only
    for full leaves gets one, and a dialogue of a full leaf that can carry the open one moves
    there. Without it a leaf few dialogues can carry stays short of its share while the left-out
    dialogues overfill popular ones. Each move takes the held dialogue that ranks the next leaf
    highest, so the moves stay the same when unrelated dialogues are added."""
    held: dict[tuple, set[str]] = {lf: set() for lf in caps}
    for did, lf in chosen.items():
        held[lf].add(did)
    movers_of: dict[tuple, dict[tuple, str]] = {}

    def movers(a: tuple) -> dict[tuple, str]:
        if a not in movers_of:
            best: dict[tuple, tuple] = {}
            for did in held[a]:
                for rank, b in enumerate(prefs[did]):
                    if b != a and (b not in best or (rank, did) < best[b]):
                        best[b] = (rank, did)
            movers_of[a] = {b: did for b, (_, did) in sorted(best.items(), key=lambda kv: (kv[1], str(kv[0])))}
        return movers_of[a]

    for u in unmatched:
        parent: dict[tuple, tuple[tuple | None, str]] = {}
        queue: deque[tuple] = deque()
        for lf in prefs[u]:
            parent[lf] = (None, u)
            queue.append(lf)
        while queue:
            a = queue.popleft()
            if len(held[a]) < caps[a]:
                break
            for b, did in movers(a).items():
                if b not in parent:
                    parent[b] = (a, did)
                    queue.append(b)
        else:
            continue  # every leaf u reaches is full: u keeps its first choice (see _assign)
        step: tuple | None = a
        while step is not None:
            prev, did = parent[step]
            held[step].add(did)
            if prev is not None:
                held[prev].discard(did)
                movers_of.pop(prev, None)
            chosen[did] = step
            movers_of.pop(step, None)
            step = prev


def _assign(
    items: list[tuple[dict, _Injector, dict]], salt: tuple, min_per_leaf: int = 1, weights: dict[str, float] | None = None
) -> list[tuple[dict, _Injector, list, dict]]:
    """Weighted assignment of leaves to a split's dialogues (see the module docstring), stable
    under additions: every draw is keyed by (salt, dialogue id), so a dialogue's assignment only
    changes when the dialogues competing for its leaf do. When the split has room (two dialogues
    per leaf), every leaf it can carry first gets `min_per_leaf` dialogues (rarest leaf first, each
    from the dialogues with the fewest options). Each type's capacity is its weight's share of the
    split (what a type cannot carry goes to the others), split evenly over its leaves; dialogues
    then rank their leaves by a weighted random draw and are matched by deferred acceptance, the
    dialogues with fewer options first at each leaf. A dialogue no leaf has room for takes its
    first choice; a zero-weight type is never assigned."""
    weights = weights or {}
    w = lambda t: weights.get(t, 1.0)  # noqa: E731
    items = [(d, inj, {lf: v for lf, v in feas.items() if w(lf[0]) > 0}) for d, inj, feas in items]
    options = {d["dialogue_id"]: list(feas) for d, _, feas in items if feas}
    n_leaf = Counter(leaf for leaves in options.values() for leaf in leaves)
    n_type = Counter(t for leaves in options.values() for t in {lf[0] for lf in leaves})
    leaves_of = {t: sorted((lf for lf in n_leaf if lf[0] == t), key=str) for t in n_type}

    def priority(did: str, leaf: tuple) -> tuple:
        return (len(options[did]), _unit(salt, did, leaf, "priority"))

    reserved: dict[str, tuple] = {}
    for _ in range(min_per_leaf if len(options) >= 2 * len(n_leaf) else 0):
        for leaf in sorted(n_leaf, key=lambda lf: (n_leaf[lf], str(lf))):
            cands = [did for did, leaves in options.items() if leaf in leaves and did not in reserved]
            if cands:
                reserved[min(cands, key=lambda did: priority(did, leaf))] = leaf
    type_caps = _apportion(len(options), {t: w(t) for t in n_type}, n_type)
    caps: dict[tuple, int] = {}
    for t, leaves in leaves_of.items():
        caps |= _apportion(type_caps[t], dict.fromkeys(leaves, 1.0), {lf: n_leaf[lf] for lf in leaves})
    for leaf in reserved.values():
        caps[leaf] -= 1  # may go below 0: the reservations then already exceed the leaf's share
    # A leaf's draw weighs its type's weight over the type's leaves: first choices follow the weights.
    leaf_w = {lf: w(lf[0]) / len(leaves_of[lf[0]]) for lf in n_leaf}
    prefs = {
        did: sorted(leaves, key=lambda lf: (-math.log(_unit(salt, did, lf, "prefer")) / leaf_w[lf], str(lf)))
        for did, leaves in options.items()
    }
    chosen = _deferred_acceptance({did: p for did, p in prefs.items() if did not in reserved}, priority, caps)
    _fill_by_moves(chosen, prefs, caps, sorted(set(prefs) - set(chosen) - set(reserved), key=lambda d: (len(prefs[d]), d)))
    chosen |= reserved
    out = []
    for d, inj, feas in items:
        did = d["dialogue_id"]
        if did in options:  # the chosen leaf first, the dialogue's other leaves in its order as fallbacks
            first = chosen.get(did, prefs[did][0])
            out.append((d, inj, [first] + [lf for lf in prefs[did] if lf != first], feas))
    return sorted(out, key=lambda x: x[0]["dialogue_id"])


# One dialogue to inject: (split, dialogue, injector, subtype order, feasible turns per leaf).
_Work = tuple[str, dict, _Injector, list, dict]


def _answerable_seeds_by_doc(seeds: dict) -> dict[str, list[dict]]:
    """Each document's answerable seeds in seed-id order (a turn's sibling seeds)."""
    by_doc: dict[str, list[dict]] = {}
    for s in seeds.values():
        if s["answerable"]:
            by_doc.setdefault(s["doc_id"], []).append(s)
    for v in by_doc.values():
        v.sort(key=lambda s: s["seed_id"])
    return by_doc


def _entity_inventories(
    passages: pl.DataFrame, dialogues: pl.DataFrame, cfg: InjectConfig, registry: dict, cache_dir: Path | None
) -> tuple[dict, dict[tuple[str, str], bytes]]:
    """Per (split, language) of the dialogues, the entities entity_error may swap in (none when it
    is off), and a digest of the texts each inventory was built from."""
    inventories: dict = {}
    digests: dict[tuple[str, str], bytes] = {}
    if "entity_error" in registry["contradictory"].subtypes and "contradictory" in cfg.types:
        cache = entities.mentions_cache(cache_dir)
        try:
            for (split, lang), part in sorted(
                passages.filter(pl.col("split").is_in(dialogues["split"].unique().to_list())).group_by("split", "lang"),
                key=lambda g: g[0],
            ):
                texts = part.sort("passage_id")["text"].to_list()
                inventories[(split, lang)] = entities.EntityInventory.build(texts, lang, cache=cache)
                digests[(split, lang)] = item_digest((lang, texts))
        finally:
            if cache is not None:
                cache.close()
    return inventories, digests


def _view_data(inputs: Frames, dialogues: pl.DataFrame, registry: dict, llm: LLMRouter, ctx: StageContext[InjectConfig]) -> dict:
    """What the turn views draw on: passages, seeds, P_n, sibling seeds, entity and claim inventories."""
    cfg = ctx.config
    seeds = {s["seed_id"]: s for s in inputs["qa_seeds"].iter_rows(named=True)}
    by_doc = _answerable_seeds_by_doc(seeds)
    passages = inputs["passages"].select("passage_id", "text", "doc_id", "split", "lang")
    passage_rows = {p["passage_id"]: p for p in passages.iter_rows(named=True)}
    # P_n for False Acceptance: the first K hard negatives, K as the turns' contexts have it.
    k = inputs["turns"]["context"].list.len().max() if inputs["turns"].height else None
    k = int(k) if k is not None else 10  # type: ignore[arg-type]  # max() of a UInt32 column: an int or None
    negatives = _FalseAcceptanceNegatives(
        inputs["hard_negatives"], seeds, passage_rows, llm, ctx.sections.get("retrieve") or HardNegativeConfig(), k
    )
    inventories, inventory_digests = _entity_inventories(passages, dialogues, cfg, registry, ctx.cache_dir)
    return {
        "passages": passage_rows,
        # One read-only entry per passage, shared by every turn view with it in its context (a copy
        # per view held 150 MB at 3,060 documents while the stage planned).
        "context_entries": {
            pid: {"passage_id": pid, "text": p["text"], "doc_id": p["doc_id"]} for pid, p in passage_rows.items()
        },
        "seeds": seeds,
        "negatives": negatives,
        "by_doc": by_doc,
        "entities": inventories,
        "entity_digests": inventory_digests,
        "claims": fabricate.inventories(inputs["passages"], dialogues["split"].unique().to_list())
        if "unverifiable" in cfg.types
        else {},
    }


def _plan(
    dialogues: pl.DataFrame,
    turns_by_dlg: dict[str, list[dict]],
    data: dict,
    sources: list[_Injector],
    leaves: list[tuple[str, str | None]],
    ctx: StageContext[InjectConfig],
) -> tuple[list[_Work], int]:
    """Every split's dialogues assigned a subtype order (the test split alternates the injectors),
    and how many dialogues were looked at (the first half of the stage's progress)."""
    cfg = ctx.config
    cache = (
        open_result_cache(ctx.cache_dir / CACHE_FILE, "inject-feasibility", code_hash(__name__), buffer=2000)
        if ctx.cache_dir
        else None
    )
    memo = _FeasibilityMemo(cache, cfg, data["entity_digests"]) if cache is not None else None
    work: list[_Work] = []
    done = 0
    try:
        for split in SPLITS:
            dl = list(dialogues.filter(pl.col("split") == split).iter_rows(named=True))
            if not dl:
                continue
            names = sources if split == "test" else sources[:1]
            by_name = {s.name: s for s in names}
            injector_of = _share_out([d["dialogue_id"] for d in dl], [s.name for s in names], (ctx.seed, split, "injector"))
            items = []
            for d in dl:
                inj = by_name[injector_of[d["dialogue_id"]]]
                views = _views(d, turns_by_dlg[d["dialogue_id"]], data, inj.variant)
                items.append((d, inj, _feasible(views, leaves, inj, d["dialogue_id"], memo, split)))
                done += 1
                ctx.progress(done, dialogues.height * 2)
            work += [(split, *a) for a in _assign(items, (ctx.seed, split), cfg.min_per_subtype, cfg.weights())]
    finally:
        if cache is not None:
            cache.close()
    return work, done


def run(inputs: Frames, ctx: StageContext[InjectConfig]) -> Frames:
    cfg = ctx.config
    registry = load_injectors()
    unknown = [t for t in cfg.types if t not in registry]
    if unknown:
        raise ValueError(f"inject.types names unknown hallucination types {unknown}; registered: {sorted(registry)}")
    llm = ctx.llm
    roles = cfg.injector_roles or [f"injector_{c}" for c in "ab"]
    passed = set(inputs["dialogue_qc"].filter(pl.col("passed"))["dialogue_id"].to_list())
    dialogues = inputs["dialogues"].filter(pl.col("dialogue_id").is_in(list(passed))).sort("dialogue_id")
    turns_by_dlg: dict[str, list[dict]] = {}
    kept = inputs["turns"].filter(pl.col("dialogue_id").is_in(list(passed)))
    for t in shared_rows(kept.sort("dialogue_id", "turn_index")):
        turns_by_dlg.setdefault(t["dialogue_id"], []).append(t)
    del kept
    data = _view_data(inputs, dialogues, registry, llm, ctx)
    passage_langs = inputs["passages"]["lang"]
    for name in ("turns", "passages", "qa_seeds", "hard_negatives"):
        hand_back(inputs, name)  # held as Python rows from here
    # The turns' answers are read for their entities while planning: analysed in one batch first.
    ko = set(dialogues.filter(pl.col("lang") == "ko")["dialogue_id"].to_list())
    prefetch_noun_phrases(t["response"] for d, ts in turns_by_dlg.items() if d in ko for t in ts)
    sources = [
        _Injector(name, roles[i % len(roles)], "ab"[i % 2], llm, cfg, registry, data["negatives"])
        for i, name in enumerate(cfg.injectors)
    ]
    work, base = _plan(dialogues, turns_by_dlg, data, sources, _leaves(cfg, registry), ctx)

    def report(n: int, _total: int) -> None:
        ctx.progress(base + n, dialogues.height * 2)

    sentences.load_for(passage_langs)
    # Each dialogue's attempts run in order; all dialogues of every split together (see llm.parallel).
    outcomes = map_items(lambda w: _inject_dialogue(*w[1:], cfg), work, llm, [*roles, JUDGE], report, _calls_in_sequence)
    rows: list[InjectionsRow] = []
    given_up: Counter = Counter()  # dialogues without an injection, by why
    for (split, d, inj, _, _), (made, why) in zip(work, outcomes):
        if made:
            rows.append(_row(d, split, inj, *made))
        else:
            given_up[why] += 1
    if given_up:
        ctx.warn(
            f"stage inject: {sum(given_up.values())} dialogues got no injection within inject.max_attempts="
            f"{cfg.max_attempts} calls: " + ", ".join(f"{why} ({n})" for why, n in sorted(given_up.items()))
        )
    return {"injections": typed_rows_frame(rows, CONTRACTS["injections"].columns, "injection_id")}


def _calls_in_sequence(w: _Work) -> int:
    """An item's calls one after another on its first attempt: a False Acceptance of an answerable
    turn whose seed's candidates are not judged yet asks the judge before the injector. Those items
    start first, so that their second calls do not trail the stage's last wave."""
    _, _, inj, order, feas = w
    candidates = feas.get(order[0]) if order else None
    if not candidates:
        return 0
    view = candidates[0][0]
    pending = order[0][0] == "false_acceptance" and view.turn["answerable"] and view.turn["seed_id"] in inj.negatives.pending
    return 2 if pending else 1


def _inject_dialogue(d: dict, inj: _Injector, order: list, feas: dict, cfg: InjectConfig) -> tuple[tuple | None, str]:
    """The first usable injection of the dialogue's candidates (subtypes in `order`, each subtype's
    turns best-suited first) within `cfg.max_attempts` injector calls; else None and why not."""
    attempts, why = 0, "no subtype fits the dialogue"
    for htype, sub in order:
        for view, seed in feas[(htype, sub)]:
            if attempts >= cfg.max_attempts:
                return None, "attempts exhausted: " + why
            attempts += 1
            out = inj.call(view, htype, sub, seed, d["dialogue_id"])
            if _usable(out, view, cfg.max_minimal_edit_words):
                return (htype, view, out), ""
            why = "the call failed" if out is None else "the output was unusable"
    return None, why


def _usable(out: Injected | None, view: TurnView, max_edit_words: int) -> bool:
    """An output changes the turn, and a minimal-edit subtype's change stays minimal."""
    if out is None or (out.context is None and out.response == view.turn["response"]):
        return False
    return out.subtype not in minimal_edit_subtypes() or word_edit_distance(view.turn["response"], out.response) <= max_edit_words


def _row(d: dict, split: str, inj: _Injector, htype: str, view: TurnView, out: Injected) -> InjectionsRow:
    t = view.turn
    chars, words = edit_distance(t["response"], out.response)
    return {
        "injection_id": "inj-" + hashlib.sha256(f"{d['dialogue_id']}|{inj.name}".encode()).hexdigest()[:14],
        "dialogue_id": d["dialogue_id"],
        "turn_id": t["turn_id"],
        "turn_index": t["turn_index"],
        "split": split,
        "injector": inj.name,
        "hallu_type": htype,
        "hallu_subtype": out.subtype,
        "original_response": t["response"],
        "injected_response": out.response,
        # `out` comes from _Injector.call, whose replaced context is {passage_id, role} entries
        "injected_context": cast(list[ContextEntry], out.context) if out.context is not None else t["context"],
        "counterpart_response": out.counterpart if out.counterpart is not None else t["response"],
        "counterpart_label": out.counterpart_label,
        "edit": out.edit,
        "strategy": out.strategy,
        "edit_chars": chars,
        "edit_words": words,
    }


# ---- gate rules -------------------------------------------------------------------------------
def _one_injection_per_dialogue(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    return (
        df.group_by("dialogue_id")
        .agg(n_injected_turns=pl.len())
        .with_columns(ok=pl.col("n_injected_turns") == 1)
        .sort("dialogue_id")
    )


def _subtype_matches_type(df: pl.DataFrame, _: dict) -> pl.DataFrame:
    subtypes = subtypes_by_type()
    ok = [
        (sub is None and not subtypes[t]) or (sub in subtypes[t])
        for t, sub in zip(df["hallu_type"].to_list(), df["hallu_subtype"].to_list())
    ]
    return df.select("injection_id", "hallu_type", "hallu_subtype").with_columns(ok=pl.Series(ok, dtype=pl.Boolean))


STAGE = Stage(
    "inject",
    run,
    InjectConfig,
    inputs=("dialogues", "turns", "dialogue_qc", "passages", "qa_seeds", "hard_negatives"),
    outputs=("injections",),
    description="hallucination injection",
    reads=("retrieve",),
    roles=("injector_a", "injector_b", JUDGE),
    configured_roles=lambda cfg, _roles: cfg.injector_roles,
    operations=(
        "inject_contradictory",
        "inject_unverifiable",
        "inject_irrelevance",
        "inject_false_acceptance",
        "inject_false_refusal",
        "perturb_entity",
        "refuse_turn",
        "judge_answerability",
    ),
    rules={
        "injections": (
            Rule(
                "one_injected_turn_per_dialogue",
                "exactly one injected turn per base dialogue (one source each)",
                _one_injection_per_dialogue,
            ),
            Rule("subtype_matches_type", "the subtype belongs to the type", _subtype_matches_type),
        )
    },
)
