"""Search-R1 questions: deterministic, split by subject (heldout_in) and by template (heldout_out),
answers that follow the world's facts, SQuAD-style scoring, a validated JSONL corpus."""

from __future__ import annotations

import pytest

from agentic_rl.data import search_qa as d


def test_deterministic_and_split():
    a = d.make_tasks(50, 0, "train")
    assert a == d.make_tasks(50, 0, "train") and a != d.make_tasks(50, 1, "train")
    train = d.make_tasks(500, 0, "train")
    held_in, held_out = d.make_tasks(200, 0, "heldout_in"), d.make_tasks(200, 0, "heldout_out")
    subjects = lambda ts: {t.meta["chain"][0][0] for t in ts}  # noqa: E731
    assert not subjects(train) & subjects(held_in)
    wordings = {w for t in d.TRAIN_TEMPLATES for w in t.wordings}
    assert {t.meta["template"] for t in held_out} <= {t.id for t in d.HELDOUT_TEMPLATES}
    assert not any(w.format(s=t.meta["chain"][0][0]) == t.prompt for t in held_out for w in wordings)


def test_answers_follow_the_facts():
    w = d.world()
    for t in d.make_tasks(100, 2, "train") + d.make_tasks(100, 2, "heldout_out"):
        x = t.meta["chain"][0][0]
        for entity, key, value in t.meta["chain"]:
            assert entity == x and w.entities[x].facts[key] == value
            x = value
        assert t.answer == x and t.meta["hops"] == len(t.meta["chain"])


def test_exact_match_and_f1():
    assert d.exact_match("The  Kesa Dumar.", ["kesa dumar"]) == 1.0  # case, article, punctuation, spaces
    assert d.exact_match("Kesa", ["Kesa Dumar"]) == 0.0
    # pred {kesa}, gold {kesa, dumar}: precision 1, recall 1/2 -> F1 = 2 * 1 * 0.5 / 1.5 = 2/3
    assert d.token_f1("Kesa", ["Kesa Dumar"]) == pytest.approx(2 / 3)
    assert d.token_f1("Lisk", ["Kesa Dumar", "Lisk"]) == 1.0  # best over golds and aliases


def test_jsonl_corpus_errors_name_the_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": 1, "title": "A", "text": "alpha"}\n\n{"title": "B"}\n')
    with pytest.raises(ValueError, match=r"c.jsonl:3: expected a JSON object with 'id' and 'text'"):
        d.load_corpus(str(path))
    path.write_text('{"id": 1, "title": "A", "text": "alpha"}\n')
    assert d.load_corpus(str(path))[0].text == "alpha"
