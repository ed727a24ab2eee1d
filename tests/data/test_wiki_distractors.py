"""Wikipedia distractors: a MediaWiki export read from a .bz2 file or from inside a wheel, articles
only (no redirects, no other namespaces), markup stripped, ~100-word passages."""

from __future__ import annotations

import bz2
import importlib.util
import zipfile

import pytest

from agentic_rl.data import search_qa
from agentic_rl.data.wiki_distractors import GENSIM_DUMP, chunk, strip_markup, wiki_passages

_PAGE = """<page><title>{title}</title><ns>{ns}</ns><id>1</id>{redirect}<revision><id>2</id>
<text xml:space="preserve">{text}</text></revision></page>"""
_ARTICLE = ("{{Infobox river|name=Tarn}}'''Tarn''' is a [[river]] in [[France|southern France]].&lt;ref&gt;Atlas, "
            "p. 3&lt;/ref&gt;\n== Course ==\n{| class=wikitable\n| a || b\n|}\n" + "It flows west. " * 51
            + "[[File:Tarn.jpg|thumb|The [[Tarn]] at Albi]][[Category:Rivers]]")


def _write_dump(path, pages: list[str]) -> None:
    xml = f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">{"".join(pages)}</mediawiki>'
    path.write_bytes(bz2.compress(xml.encode()))


@pytest.fixture
def dump(tmp_path):
    path = tmp_path / "dump.xml.bz2"
    _write_dump(path, [
        _PAGE.format(title="Tarn", ns=0, redirect="", text=_ARTICLE),
        _PAGE.format(title="TarnRiver", ns=0, redirect='<redirect title="Tarn" />', text="#REDIRECT [[Tarn]]"),
        _PAGE.format(title="Wikipedia:About", ns=4, redirect="", text="About this site. " * 50),
    ])
    return path


def test_reads_articles_from_a_dump_or_a_wheel(dump, tmp_path):
    passages = wiki_passages(str(dump))
    assert {p.title for p in passages} == {"Tarn"}
    assert [p.id for p in passages] == ["wiki/tarn/0", "wiki/tarn/1"]  # 7 + 153 words: 100 and 60
    assert passages[0].text.startswith("Tarn is a river in southern France. It flows west.")
    wheel = tmp_path / "gensim-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(dump, GENSIM_DUMP)
    assert wiki_passages(str(wheel)) == passages


def test_strip_markup_keeps_prose_only():
    text = strip_markup(_ARTICLE.replace("&lt;", "<").replace("&gt;", ">"))
    assert text.startswith("Tarn is a river in southern France. It flows west.")
    for debris in ("{{", "[[", "]]", "'''", "<ref", "Atlas", "Course", "wikitable", "File:", "Albi", "Category"):
        assert debris not in text
    assert strip_markup("[[a|b|c]] [http://x.org label] {{a|{{b}}}}x&nbsp;y") == "c label x y"


def test_chunks_are_100_words_and_a_short_tail_joins_the_last():
    # 250 words: 100 + 100 + 50 (a tail of 50 >= 30 stays); 220 words: 100 + 120 (a tail of 20 joins)
    assert [len(p.text.split()) for p in chunk("T", "w " * 250)] == [100, 100, 50]
    assert [len(p.text.split()) for p in chunk("T", "w " * 220)] == [100, 120]
    assert chunk("T", "too short " * 10) == []


def test_missing_dump_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Wikipedia dump"):
        wiki_passages(str(tmp_path / "nothing.bz2"))


def test_distractors_join_the_corpus_reproducibly(dump):
    kb = search_qa.load_corpus("kb")
    mixed = search_qa.load_corpus("kb", wiki_distractors=2, wiki_dump=str(dump))
    assert mixed[: len(kb)] == kb and {p.title for p in mixed[len(kb):]} == {"Tarn"}
    with pytest.raises(ValueError, match="asked for 3 Wikipedia distractors; the dump has 2"):
        search_qa.load_corpus("kb", wiki_distractors=3, wiki_dump=str(dump))


@pytest.mark.skipif(importlib.util.find_spec("gensim") is None, reason="gensim (its test data) not installed")
def test_the_real_dump_in_gensim():
    passages = wiki_passages()
    assert len(passages) > 4000 and passages[0].title == "Anarchism"
    assert passages[0].text.startswith("Anarchism is a political philosophy")
