"""Local retrieval for the Search-R1 env: BM25 (`bm25s`) over a passage corpus, no network.

The query is model output, so `search` accepts any string: empty, all stopwords, unknown words or
binary noise give an empty list, never an exception. Ranking is deterministic: ties keep corpus order.

Settings: bm25s defaults (Lucene variant, k1=1.5, b=0.75), English stopwords, lowercase word tokens
of two or more characters, no stemmer: the corpus names are coined words a stemmer would only mangle,
and no stemmer means nothing to download.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_TOP_K = 3
DEFAULT_MAX_CHARS = 1000  # three knowledge-base passages (~250 characters each) fit whole


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str


class BM25Retriever:
    """A read-only index over `passages` (title and text are indexed together)."""

    def __init__(self, passages: Sequence[Passage]):
        import bm25s

        if not passages:
            raise ValueError("cannot index an empty corpus")
        self.passages = list(passages)
        corpus = [f"{p.title} {p.text}" for p in self.passages]
        tokens = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
        self.vocab: dict[str, int] = dict(tokens.vocab)  # word -> id
        self.index = bm25s.BM25()
        self.index.index(tokens, show_progress=False)

    def search(self, query: str, top_k: int = DEFAULT_TOP_K) -> list[Passage]:
        """The `top_k` best passages with a positive score, best first."""
        ids = self._query_ids(query)
        if not ids or top_k < 1:
            return []
        scores = self.index.get_scores(ids)
        best = np.argsort(-scores, kind="stable")[: min(top_k, len(self.passages))]
        return [self.passages[i] for i in best if scores[i] > 0]

    def _query_ids(self, query: str) -> list[int]:
        """Vocabulary ids of the query's words; words the corpus never uses are dropped (they cannot
        match, and bm25s would map them to its empty token)."""
        import bm25s

        if not isinstance(query, str) or not query.strip():
            return []
        words = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        return [self.vocab[w] for w in words if w in self.vocab and w != ""]


def format_passages(passages: Sequence[Passage], max_chars: int) -> str:
    """What the model reads inside <information>: `Doc i (Title): text` lines, best first, cut to
    `max_chars` characters (the passage-budget knob) at a word boundary, with a visible `…`.

    Cutting the whole block (not each passage) keeps the best passage whole when the budget is tight.
    """
    text = "\n".join(f"Doc {i} ({p.title}): {p.text}" for i, p in enumerate(passages, 1))
    if len(text) <= max_chars:
        return text
    if max_chars < 1:
        return ""
    cut = text[: max_chars - 1]
    if " " in cut and not text[max_chars - 1].isspace():
        cut = cut[: cut.rfind(" ")]  # drop the half word
    return cut.rstrip() + "…"
