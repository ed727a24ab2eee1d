"""Search-R1 questions: deterministic, split by entity (heldout_in) and by template and wording
(heldout_out), answers that follow the world's facts, demonstrations that show the real retrieval,
SQuAD-style scoring, a validated JSONL corpus."""

from __future__ import annotations

import json

import pytest

from agentic_rl.data import search_qa as d
from agentic_rl.data.search_kb import world
from agentic_rl.tools.search import BM25Retriever, format_passages


@pytest.fixture(scope="module")
def kb_retriever() -> BM25Retriever:
    return BM25Retriever(d.load_corpus("kb"))


def test_make_tasks_is_deterministic():
    a = d.make_tasks(50, 0, "train")
    assert a == d.make_tasks(50, 0, "train") and a != d.make_tasks(50, 1, "train")
    assert d.make_tasks(20, 0, "train") == a[:20]  # n only truncates
    assert len({t.id for t in d.make_tasks(200, 0, "heldout_out")}) == 200
    with pytest.raises(ValueError, match="unknown split 'test'"):
        d.make_tasks(1, 0, "test")


def test_heldout_out_wordings_never_occur_in_train():
    train, held_out = d.make_tasks(600, 0, "train"), d.make_tasks(300, 0, "heldout_out")
    train_wordings = {w for t in d.TRAIN_TEMPLATES for w in t.wordings}
    out_wordings = {w for t in d.HELDOUT_TEMPLATES for w in t.wordings} | {
        w for t in d.TRAIN_TEMPLATES for w in t.heldout_wordings}
    assert not train_wordings & out_wordings
    assert not {t.meta["wording"] for t in train} & {t.meta["wording"] for t in held_out}
    # the prompt text itself: no heldout_out question could be produced by a training wording
    subjects = {t.meta["chain"][0][0] for t in held_out}
    train_prompts = {w.format(s=s) for w in train_wordings for s in subjects}
    assert not train_prompts & {t.prompt for t in held_out}
    assert {t.meta["template"] for t in held_out} >= {t.id for t in d.HELDOUT_TEMPLATES}


def test_heldout_in_asks_train_templates_about_unseen_entities():
    train, held_in = d.make_tasks(1000, 0, "train"), d.make_tasks(300, 0, "heldout_in")
    assert {t.meta["template"] for t in held_in} <= {t.id for t in d.TRAIN_TEMPLATES}
    assert {t.meta["wording"] for t in held_in} <= {t.meta["wording"] for t in train} | {
        t.wording_id(w) for t in d.TRAIN_TEMPLATES for w in t.wordings}
    # every passage a heldout_in question needs (subject and bridge) is needed by no train question
    gold = lambda ts: {p for t in ts for p in t.meta["gold_passages"]}  # noqa: E731
    assert not gold(train) & gold(held_in)


def test_answers_follow_the_facts_and_hops():
    w = world(0)
    tasks = d.make_tasks(200, 2, "train") + d.make_tasks(200, 2, "heldout_out")
    assert {t.meta["hops"] for t in tasks} == {1, 2}
    for t in tasks:
        x = t.meta["chain"][0][0]
        assert x in t.prompt
        for entity, key, value in t.meta["chain"]:
            assert entity == x and w.entities[x].facts[key] == value
            x = value
        assert t.answer == x and t.meta["hops"] == len(t.meta["chain"]) == len(t.meta["gold_passages"])
        assert t.meta["aliases"] == list(w.entities[x].aliases) if x in w.entities else t.meta["aliases"] == []


def test_demonstration_shows_the_real_retrieval_and_the_gold_answer(kb_retriever):
    tasks = d.make_tasks(40, 1, "train") + d.make_tasks(40, 1, "heldout_in") + d.make_tasks(40, 1, "heldout_out")
    for task in tasks:
        msgs = d.demonstration(task, kb_retriever, top_k=3, max_chars=600)
        hops = task.meta["hops"]
        assert [m["role"] for m in msgs] == ["assistant", "tool"] * hops + ["assistant"]
        for action, tool, (entity, _, value) in zip(msgs[0::2], msgs[1::2], task.meta["chain"]):
            assert action["content"].startswith("<think>") and action["content"].endswith("</search>")
            query = action["content"].split("<search>")[1].removesuffix("</search>")
            assert entity in query
            assert tool["content"] == format_passages(kb_retriever.search(query, 3), 600)
            assert value in tool["content"]
        assert msgs[-1]["content"].endswith(f"</think>\n<answer>{task.answer}</answer>")


def test_demonstration_raises_when_the_corpus_lacks_the_facts():
    from agentic_rl.tools.search import Passage

    other = BM25Retriever([Passage("x", "Elsewhere", "A passage about something else entirely.")])
    with pytest.raises(RuntimeError, match="no demonstration query retrieves"):
        d.demonstration(d.make_tasks(1, 0, "train")[0], other)


def test_exact_match_and_f1_against_hand_computed_values():
    assert d.normalize_answer("  The Kesa-Dumar, an  ARTIST! ") == "kesadumar artist"
    assert d.exact_match("The  Kesa Dumar.", ["kesa dumar"]) == 1.0  # case, article, punctuation, spaces
    assert d.exact_match("Kesa", ["Kesa Dumar"]) == 0.0
    assert d.exact_match("Republic of Velmor", ["Velmor", "Republic of Velmor"]) == 1.0  # an alias
    # pred {kesa}, gold {kesa, dumar}: precision 1/1, recall 1/2 -> F1 = 2 * 1 * 0.5 / 1.5 = 2/3
    assert d.token_f1("Kesa", ["Kesa Dumar"]) == pytest.approx(2 / 3)
    # pred [kesa, dumar, of, lisk] ("of" is no article: kept), gold [kesa, dumar]: P = 2/4, R = 2/2
    # -> F1 = 2 * (1/2) * 1 / (3/2) = 2/3
    assert d.token_f1("Kesa Dumar of Lisk", ["Kesa Dumar"]) == pytest.approx(2 / 3)
    # pred [kesa, dumar, lisk], gold [kesa, dumar]: P = 2/3, R = 1 -> F1 = 2 * (2/3) / (5/3) = 4/5
    assert d.token_f1("The Kesa Dumar, Lisk", ["Kesa Dumar"]) == pytest.approx(4 / 5)
    # best over golds: {velmor} vs "republic of velmor" -> {republic, of, velmor}: P = 1, R = 1/3 -> 1/2;
    # vs "Velmor" -> 1.0
    assert d.token_f1("Velmor", ["Republic of Velmor", "Velmor"]) == 1.0
    assert d.token_f1("Velmor", ["Republic of Velmor"]) == pytest.approx(1 / 2)
    # repeated tokens count once each: pred {lisk x2}, gold {lisk}: common 1, P = 1/2, R = 1 -> 2/3
    assert d.token_f1("Lisk Lisk", ["Lisk"]) == pytest.approx(2 / 3)
    assert d.token_f1("the", ["a"]) == 1.0 and d.token_f1("the", ["Lisk"]) == 0.0  # both empty after normalizing
    assert d.token_f1("Lisk", []) == 0.0 and d.exact_match("Lisk", []) == 0.0


def test_jsonl_corpus_loads_and_errors_name_the_line(tmp_path):
    path = tmp_path / "c.jsonl"
    good = [{"id": 1, "title": "A", "text": "alpha"}, {"id": "b", "title": "B", "text": "beta"}]
    path.write_text("\n".join(json.dumps(r) for r in good) + "\n\n")
    assert [(p.id, p.title, p.text) for p in d.load_corpus(str(path))] == [("1", "A", "alpha"), ("b", "B", "beta")]
    bad_lines = {
        '{"title": "B", "text": "beta"}': r"c.jsonl:3: missing 'id'",
        '{"id": 3, "title": "C", "text": "  "}': r"c.jsonl:3: 'text' is empty",
        '{"id": "b", "title": "C", "text": "gamma"}': r"c.jsonl:3: duplicate id 'b'",
        '{"id": 3, "title": "C", "text": ': r"c.jsonl:3: not valid JSON",
        '["id", "title", "text"]': r"c.jsonl:3: expected a JSON object",
        '{"id": 3, "title": null, "text": "gamma"}': r"c.jsonl:3: 'title' and 'text' must be strings",
    }
    for line, message in bad_lines.items():
        path.write_text("\n".join(json.dumps(r) for r in good) + "\n" + line + "\n")
        with pytest.raises(ValueError, match=message):
            d.load_corpus(str(path))
    with pytest.raises(FileNotFoundError):
        d.load_corpus(str(tmp_path / "missing.jsonl"))


def test_kb_corpus_is_one_passage_per_entity_and_seeded():
    kb = d.load_corpus("kb")
    assert len(kb) == len(world(0).entities) and len({p.id for p in kb}) == len(kb)
    assert d.load_corpus("kb", seed=0) == kb and d.load_corpus("kb", seed=1) != kb
