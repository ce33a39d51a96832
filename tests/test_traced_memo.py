"""A result kept with the reads it made is taken again only while those reads hold."""

from __future__ import annotations

import pytest

from finhallu.result_cache import ResultCache, item_digest
from finhallu.traced_memo import Reads, TracedMemo


def _follow(start: str, links, names) -> list[str]:
    """Follows links from `start` until a dead end: which keys it reads depends on what it read."""
    seen: list[str] = []
    at = start
    while at is not None and at not in seen:
        seen.append(at)
        at = links.get(at)
    return [names[k] for k in seen]


def _run(memo: TracedMemo, links: dict, names: dict, start: str, calls: list) -> list[str]:
    key = item_digest(("follow", start))
    found = memo.get([key])
    if key in found:
        return found[key]
    calls.append(start)
    reads = Reads()
    out = _follow(start, reads.view("links", links), reads.view("names", names))
    memo.put(key, reads, out)
    return out


def test_a_result_is_reused_while_what_it_read_holds(tmp_path):
    links = {"a": "b", "b": "c", "x": "y"}
    names = {"a": "A", "b": "B", "c": "C", "x": "X", "y": "Y"}
    cache = ResultCache(tmp_path / "r.sqlite", "follow", "1")
    calls: list = []
    run = lambda: _run(TracedMemo(cache, {"links": links, "names": names}), links, names, "a", calls)  # noqa: E731
    assert run() == ["A", "B", "C"] and calls == ["a"]
    assert run() == ["A", "B", "C"] and calls == ["a"]  # from the memo

    names["y"], links["y"] = "Y2", "x"  # keys the run never read
    assert run() == ["A", "B", "C"] and calls == ["a"]

    names["b"] = "B2"  # a value it read
    assert run() == ["A", "B2", "C"] and calls == ["a", "a"]

    links["c"] = "x"  # a key it looked up and did not find now holds a value: the path goes on
    assert run() == ["A", "B2", "C", "X", "Y2"] and calls == ["a", "a", "a"]
    assert run() == ["A", "B2", "C", "X", "Y2"] and len(calls) == 3

    del links["b"]  # a value it read is gone
    assert run() == ["A", "B2"] and len(calls) == 4


def test_a_traced_table_cannot_be_listed():
    view = Reads().view("links", {"a": "b"})
    assert view["a"] == "b" and "a" in view and view.get("z") is None
    with pytest.raises(TypeError, match="links"):
        list(view)


def test_results_are_checked_a_chunk_at_a_time(tmp_path):
    links, names = {"a": "b", "x": "y"}, {"a": "A", "b": "B", "x": "X", "y": "Y"}
    cache = ResultCache(tmp_path / "r.sqlite", "follow", "1")
    calls: list = []
    for start in ("a", "x"):
        _run(TracedMemo(cache, {"links": links, "names": names}), links, names, start, calls)
    keys = [item_digest(("follow", s)) for s in ("a", "x")]
    names["y"] = "Y2"  # read by the run from "x" only (a memo digests the tables as they are when made)
    memo = TracedMemo(cache, {"links": links, "names": names})
    assert memo.get(keys, chunk=1) == {keys[0]: ["A", "B"]}
    assert memo.get(keys, chunk=1) == memo.get(keys)
