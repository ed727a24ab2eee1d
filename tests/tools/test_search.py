"""BM25 retrieval: the demonstrator's queries find the gold passages of the generated encyclopedia,
any model-written query is answered without raising, ties and budgets behave as documented."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.data import search_qa
from agentic_rl.tools.search import BM25Retriever, Passage, format_passages


@pytest.fixture(scope="module")
def kb_retriever() -> BM25Retriever:
    return BM25Retriever(search_qa.load_corpus("kb"))


def _recall_at(retriever: BM25Retriever, tasks, k: int) -> float:
    """Share of hops whose gold passage is in the top k for the demonstrator's first-choice query."""
    hits = [gold in {p.id for p in retriever.search(q, k)}
            for t in tasks for q, gold in zip(search_qa.demonstration_queries(t), t.meta["gold_passages"])]
    return sum(hits) / len(hits)


def test_demonstration_queries_find_the_gold_passage(kb_retriever):
    tasks = search_qa.make_tasks(300, 3, "train")
    one_hop = [t for t in tasks if t.meta["hops"] == 1]
    two_hop = [t for t in tasks if t.meta["hops"] == 2]
    assert len(one_hop) >= 120 and len(two_hop) >= 120
    assert _recall_at(kb_retriever, one_hop, 3) == 1.0
    assert _recall_at(kb_retriever, two_hop, 3) == 1.0


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=120))
def test_search_never_raises(kb_retriever, query):
    results = kb_retriever.search(query, 3)
    assert len(results) <= 3 and all(isinstance(p, Passage) for p in results)


@pytest.mark.parametrize("query", ["", "   \n\t", "the of a and is", "???", "\x00\ud7ff", "zzqx " * 2000])
def test_queries_that_match_nothing_return_empty(kb_retriever, query):
    assert kb_retriever.search(query, 3) == []


def test_ranking_is_deterministic_and_ties_keep_corpus_order():
    corpus = [Passage("a", "Vorel", "Vorel is a company founded by Kesa Dumar."),
              Passage("b", "Tarn", "Tarn is a river."),
              Passage("c", "Kesa Dumar", "Kesa Dumar was born in Lisk."),
              Passage("d", "Tarn copy", "Tarn is a river."), Passage("e", "Tarn again", "Tarn is a river.")]
    r = BM25Retriever(corpus)
    assert [p.id for p in r.search("Kesa Dumar born", 3)] == ["c", "a"]  # b shares no word: not returned
    assert [p.id for p in r.search("river", 2)] == ["b", "d"]  # three equal scores: corpus order
    assert r.search("river", 0) == [] and len(r.search("river", 50)) == 3
    assert r.search("Kesa", 3) == BM25Retriever(corpus).search("Kesa", 3)


def test_empty_corpus_is_refused():
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Retriever([])


def test_format_passages_numbers_titles_and_cuts_at_a_word():
    ps = [Passage("x", "Kesa Dumar", "Kesa Dumar was born in Lisk."), Passage("y", "Vorel", "Vorel makes clocks.")]
    full = "Doc 1 (Kesa Dumar): Kesa Dumar was born in Lisk.\nDoc 2 (Vorel): Vorel makes clocks."
    assert format_passages(ps, 1000) == full
    assert format_passages(ps, len(full)) == full
    # 30 characters: "Doc 1 (Kesa Dumar): Kesa Duma" (29) plus the marker; the half word "Duma" is dropped
    assert format_passages(ps, 30) == "Doc 1 (Kesa Dumar): Kesa…"
    assert all(len(format_passages(ps, n)) <= n for n in range(0, 90))
    assert format_passages([], 100) == "" and format_passages(ps, 0) == ""
