"""inject: passing dialogues -> `injections` (exactly one injected turn per hallucinated dialogue).

Types are balanced per split and injector by cycling a seeded order of types and, within a
type, of subtypes; the target turn is chosen by type (each injector ranks turns by how well
they suit it). The test split gets one hallucinated dialogue per configured injector (the
paper's two injector LLMs); train/valid get one from the first injector.
"""

from __future__ import annotations

import hashlib
from itertools import cycle

import polars as pl

from finhallu.config import InjectConfig
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.inject import TurnView, load_injectors


def _views(dialogue: dict, turns: list[dict], ctx_data: dict, variant: str) -> list[TurnView]:
    passages, seeds, negs = ctx_data["passages"], ctx_data["seeds"], ctx_data["negatives"]
    views = []
    for i, t in enumerate(turns):
        seed = seeds[t["seed_id"]]
        ids = [c["passage_id"] for c in t["context"]]
        views.append(TurnView(
            turn=t, history=turns[:i], lang=dialogue["lang"],
            evidence=[passages[p]["text"] for p in ids],
            gold_text=passages[t["gold_passage_id"]]["text"] if t["gold_passage_id"] else None,
            other_context=[{"passage_id": p, "text": passages[p]["text"], "doc_id": passages[p]["doc_id"]}
                           for p in ids if p != t["gold_passage_id"]],
            sibling_seeds=[s for s in ctx_data["by_doc"].get(dialogue["doc_id"], []) if s["seed_id"] != seed["seed_id"]],
            hard_negatives=negs.get(t["seed_id"], []), seed=seed, doc_id=dialogue["doc_id"], variant=variant,
        ))
    return views


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: InjectConfig = ctx.config
    injectors = load_injectors()
    unknown = [t for t in cfg.types if t not in injectors]
    if unknown:
        raise ValueError(f"inject.types names unknown hallucination types {unknown}; registered: {sorted(injectors)}")
    passed = set(inputs["dialogue_qc"].filter(pl.col("passed"))["dialogue_id"].to_list())
    dialogues = inputs["dialogues"].filter(pl.col("dialogue_id").is_in(list(passed))).sort("dialogue_id")
    turns_by_dlg: dict[str, list[dict]] = {}
    for t in inputs["turns"].sort("dialogue_id", "turn_index").iter_rows(named=True):
        turns_by_dlg.setdefault(t["dialogue_id"], []).append(t)
    seeds = {s["seed_id"]: s for s in inputs["qa_seeds"].iter_rows(named=True)}
    by_doc: dict[str, list[dict]] = {}
    for s in seeds.values():
        if s["answerable"]:
            by_doc.setdefault(s["doc_id"], []).append(s)
    # P_n for False Acceptance: the first K hard negatives, K as the turns' contexts have it.
    k = max((len(c) for c in inputs["turns"]["context"].to_list()), default=10)
    negatives: dict[str, list[str]] = {}
    for r in inputs["hard_negatives"].filter(pl.col("is_hard_negative")).sort("seed_id", "candidate_rank").iter_rows(named=True):
        if len(negatives.setdefault(r["seed_id"], [])) < k:
            negatives[r["seed_id"]].append(r["passage_id"])
    ctx_data = {"passages": {p["passage_id"]: p for p in inputs["passages"].select("passage_id", "text", "doc_id").iter_rows(named=True)},
                "seeds": seeds, "negatives": negatives, "by_doc": by_doc}

    rows = []
    done = 0
    for split in ("train", "valid", "test"):
        dl = dialogues.filter(pl.col("split") == split)
        if dl.height == 0:
            continue
        names = cfg.injectors if split == "test" else cfg.injectors[:1]
        for injector in names:
            rng = ctx.rng("inject", split, injector)
            order = list(cfg.types)
            rng.shuffle(order)
            type_cycle = cycle(order)
            sub_cycles = {t: cycle(sorted(injectors[t].subtypes, key=lambda s: rng.random()) or [None]) for t in order}
            dlg_rows = list(dl.iter_rows(named=True))
            rng.shuffle(dlg_rows)
            for d in dlg_rows:
                views = _views(d, turns_by_dlg[d["dialogue_id"]], ctx_data, injector)
                wanted = next(type_cycle)
                attempts = [wanted] + [t for t in order if t != wanted]
                made = None
                for htype in attempts:
                    inj = injectors[htype]
                    n_sub = max(1, len(inj.subtypes))
                    for _ in range(n_sub):
                        subtype = next(sub_cycles[htype])
                        ranked = sorted(views, key=lambda v: (-inj.prefers(v), v.turn["turn_index"]))
                        for view in ranked:
                            trng = ctx.rng("inject-turn", d["dialogue_id"], injector, htype, subtype, view.turn["turn_index"])
                            out = inj.inject(view, subtype, trng)
                            if out is not None and (out.context is not None or out.response != view.turn["response"]):
                                made = (htype, view, out)
                                break
                        if made:
                            break
                    if made:
                        break
                done += 1
                ctx.progress(done, dialogues.height * len(cfg.injectors))
                if not made:
                    continue
                htype, view, out = made
                t = view.turn
                iid = "inj-" + hashlib.sha256(f"{d['dialogue_id']}|{injector}".encode()).hexdigest()[:14]
                rows.append({
                    "injection_id": iid, "dialogue_id": d["dialogue_id"], "turn_id": t["turn_id"],
                    "turn_index": t["turn_index"], "split": split, "injector": injector, "hallu_type": htype,
                    "hallu_subtype": out.subtype, "original_response": t["response"], "injected_response": out.response,
                    "injected_context": out.context if out.context is not None else t["context"],
                    "counterpart_response": out.counterpart if out.counterpart is not None else t["response"],
                    "counterpart_label": out.counterpart_label, "edit": out.edit,
                })
    return {"injections": rows_frame(rows, "injection_id")}
