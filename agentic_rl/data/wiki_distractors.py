"""Real Wikipedia passages as retrieval distractors, read from the English dump excerpt that the gensim
wheel ships as test data (about 100 articles of April 2016; no download beyond PyPI, no gensim import).

The fictional knowledge base alone is too uniform: every passage is about one of its entities. Mixed
with ~100-word chunks of real articles, the index looks more like Search-R1's Wikipedia, and the
agent must read past passages that share words with its query but not its entity.

The markup stripping is rough on purpose: templates, tables, references, files and categories go,
links keep their label. A stray fragment of markup in a distractor harms nothing.
"""

from __future__ import annotations

import bz2
import functools
import html
import importlib.util
import re
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from agentic_rl.tools.search import Passage

GENSIM_DUMP = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
CHUNK_WORDS = 100
_MIN_WORDS = 30  # shorter articles and tails are list stubs or leftovers of markup


@functools.lru_cache(maxsize=2)
def wiki_passages(dump: str | None = None, chunk_words: int = CHUNK_WORDS) -> tuple[Passage, ...]:
    """Every article of the dump cut into `chunk_words`-word passages titled by the article, in dump
    order. `dump` is a gensim wheel (.whl), the .bz2 dump itself, or None for an installed gensim."""
    passages = []
    with _open_dump(dump) as raw, bz2.open(raw) as xml:
        for title, wikitext in articles(xml):
            passages += chunk(title, strip_markup(wikitext), chunk_words)
    return tuple(passages)


def _open_dump(dump: str | None) -> IO[bytes]:
    if dump is None:
        spec = importlib.util.find_spec("gensim")  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                "Wikipedia distractors read gensim's test data: `pip install gensim` (or `pip download gensim "
                "--no-deps` and pass the wheel's path as wiki_dump)")
        path = Path(next(iter(spec.submodule_search_locations))).parent / GENSIM_DUMP
    else:
        path = Path(dump)
    if not path.is_file():
        raise FileNotFoundError(f"no Wikipedia dump at {path}")
    if zipfile.is_zipfile(path):
        archive = zipfile.ZipFile(path)
        if GENSIM_DUMP not in archive.namelist():
            raise FileNotFoundError(f"{path} holds no {GENSIM_DUMP}")
        return archive.open(GENSIM_DUMP)
    return path.open("rb")


def articles(xml: IO[bytes]) -> Iterator[tuple[str, str]]:
    """(title, wikitext) of each article in a MediaWiki export: main namespace, redirects skipped."""
    for _, elem in ET.iterparse(xml, events=("end",)):
        if _local(elem.tag) != "page":
            continue
        fields = {_local(e.tag): e for e in elem.iter()}
        text = fields.get("text")
        if fields.get("ns") is not None and fields["ns"].text == "0" and "redirect" not in fields and text is not None:
            yield fields["title"].text or "", text.text or ""
        elem.clear()


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def strip_markup(wikitext: str) -> str:
    """Plain prose from wikitext, roughly."""
    s = html.unescape(wikitext)
    s = re.sub(r"<!--.*?-->", "", s, flags=re.DOTALL)
    s = re.sub(r"<ref[^>]*/>", "", s)
    s = re.sub(r"<ref[^>]*>.*?</ref>", "", s, flags=re.DOTALL)
    s = re.sub(r"<(math|gallery|timeline)[^>]*>.*?</\1>", "", s, flags=re.DOTALL)
    s = re.sub(r"<[^>]+>", "", s)
    s = _innermost_first(r"\{\{[^{}]*\}\}", lambda m: "", s)  # templates, nested
    s = _innermost_first(r"\[\[([^\[\]]*)\]\]", _link_label, s)  # links; files and categories go whole
    s = re.sub(r"\[(?:https?:)?//\S+\s*([^\]]*)\]", r"\1", s)  # external links keep their label
    lines = [ln for ln in s.splitlines() if not re.match(r"\s*(\{\||\||!|=)", ln)]  # tables, headings
    s = "\n".join(re.sub(r"^[*#:;]+\s*", "", ln) for ln in lines)
    s = re.sub(r"'{2,}|\{\{|\}\}|__[A-Z]+__", "", s)
    return " ".join(s.split())


def _innermost_first(pattern: str, repl, s: str, max_rounds: int = 20) -> str:
    for _ in range(max_rounds):
        s, n = re.subn(pattern, repl, s)
        if n == 0:
            break
    return s


def _link_label(m: re.Match) -> str:
    target, _, label = m.group(1).partition("|")
    if ":" in target:  # File:, Image:, Category:, interlanguage links
        return ""
    return label.rsplit("|", 1)[-1] if label else target


def chunk(title: str, text: str, words: int = CHUNK_WORDS) -> list[Passage]:
    """`words`-word passages of one article; a short tail joins the passage before it."""
    tokens = text.split()
    if len(tokens) < _MIN_WORDS:
        return []
    pieces = [tokens[i: i + words] for i in range(0, len(tokens), words)]
    if len(pieces) > 1 and len(pieces[-1]) < _MIN_WORDS:
        tail = pieces.pop()
        pieces[-1] += tail
    slug = re.sub(r"\W+", "-", title.lower()).strip("-")
    return [Passage(f"wiki/{slug}/{i}", title, " ".join(p)) for i, p in enumerate(pieces)]
