"""Local retrieval for the Search-R1 env: BM25 (`bm25s`) over a passage corpus, no network.

The query is model output, so `search` accepts any string: empty, all stopwords, unknown words or
binary noise give an empty list, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str


class BM25Retriever:
    def __init__(self, passages: Sequence[Passage]):
        import bm25s

        if not passages:
            raise ValueError("cannot index an empty corpus")
        self.passages = list(passages)
        tokens = bm25s.tokenize([f"{p.title} {p.text}" for p in self.passages], stopwords="en", show_progress=False)
        self.index = bm25s.BM25()
        self.index.index(tokens, show_progress=False)
        self.vocab = tokens.vocab  # word -> id

    def search(self, query: str, top_k: int = 3) -> list[Passage]:
        """The `top_k` best passages with a positive score, best first; ties keep corpus order."""
        import bm25s

        words = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        ids = [self.vocab[w] for w in words if w in self.vocab]
        if not ids or top_k < 1:
            return []
        scores = self.index.get_scores(ids)
        k = min(top_k, len(self.passages))
        best = np.argsort(-scores, kind="stable")[:k]
        return [self.passages[i] for i in best if scores[i] > 0]


def format_passages(passages: Sequence[Passage], max_chars: int) -> str:
    """What the model reads inside <information>: numbered passages with their titles, cut to a
    character budget (the passage-budget knob) with a visible marker."""
    text = "\n".join(f"Doc {i} ({p.title}): {p.text}" for i, p in enumerate(passages, 1))
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"
