"""BM25 retrieval over the generated encyclopedia: the demonstrator's queries find the gold
passages, and any model-written query is answered without raising."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.data import search_qa
from agentic_rl.envs.builtin.search_r1 import retriever
from agentic_rl.tools.search import BM25Retriever, Passage, format_passages


def test_name_plus_relation_queries_find_the_subject():
    r = retriever("kb")
    tasks = search_qa.make_tasks(200, 3, "train")
    hits = [r.search(f"{e} founder" if k == "founder" else e, 3)[:3] for t in tasks for e, k, _ in t.meta["chain"]]
    found = [any(p.title == e for p in ps) for ps, (e, _, _) in
             zip(hits, [c for t in tasks for c in t.meta["chain"]])]
    assert sum(found) / len(found) == 1.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_search_never_raises(query):
    results = retriever("kb").search(query, 3)
    assert len(results) <= 3 and all(isinstance(p, Passage) for p in results)


def test_ranking_and_budget():
    r = BM25Retriever([Passage("a", "Vorel", "Vorel is a company founded by Kesa Dumar."),
                       Passage("b", "Tarn", "Tarn is a river."), Passage("c", "Kesa Dumar", "Kesa Dumar was born in Lisk.")])
    assert [p.id for p in r.search("Kesa Dumar born", 3)] == ["c", "a"]  # b shares no word: not returned
    assert r.search("", 3) == [] and r.search("the of a", 3) == []
    text = format_passages(r.search("Kesa Dumar born", 3), 40)
    assert len(text) == 40 and text.startswith("Doc 1 (Kesa Dumar): ") and text.endswith("…")
