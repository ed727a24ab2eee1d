"""WebShaper's formal questions (`synth/webshaper.py`): the projections' set algebra on a graph small
enough to check by hand, layered expansion, the shortcut filter, and every synthesized question's
answer re-derived by a brute-force reading of the facts."""

from __future__ import annotations

import random

import pytest

from agentic_rl.data import search_qa
from agentic_rl.synth import webshaper as ws
from agentic_rl.synth.graph import Fact, KnowledgeGraph, graph_from_world, heldout_entity


def _kg() -> KnowledgeGraph:
    """Two books by Ann (B1, B2), one by Bo (B3); Ann born in Rome, Bo in Oslo; film F of B1, by Bo."""
    facts = [Fact("B1", "book.author", "Ann", "b1"), Fact("B2", "book.author", "Ann", "b2"),
             Fact("B3", "book.author", "Bo", "b3"), Fact("Ann", "person.born", "Rome", "ann"),
             Fact("Bo", "person.born", "Oslo", "bo"), Fact("F", "film.book", "B1", "f"),
             Fact("F", "film.director", "Bo", "f")]
    kinds = {"B1": "book", "B2": "book", "B3": "book", "Ann": "person", "Bo": "person", "Rome": "city",
             "Oslo": "city", "F": "film"}
    return KnowledgeGraph(facts, kinds)


def test_projections_and_their_algebra_by_hand():
    kg = _kg()
    assert kg.project("book.author", ["B1", "B3"]) == {"Ann", "Bo"}  # R(V): the authors of B1 and B3
    assert kg.project("book.author", ["Ann"], inverse=True) == {"B1", "B2"}  # R⁻(V): the books by Ann
    by_ann = ws.Proj("book.author", True, ws.Const("Ann"))
    filmed = ws.Proj("film.book", False, ws.Const("F"))
    assert ws.evaluate(ws.And((by_ann, filmed)), kg) == {"B1"}  # {B1, B2} ∩ {B1}
    assert ws.evaluate(ws.Or((filmed, ws.Proj("book.author", True, ws.Const("Bo")))), kg) == {"B1", "B3"}
    born_rome_author = ws.Proj("book.author", True, ws.Proj("person.born", True, ws.Const("Rome")))
    assert ws.evaluate(born_rome_author, kg) == {"B1", "B2"} and ws.layers(born_rome_author) == 2


def test_a_constant_one_hop_from_the_answer_below_the_first_layer_is_a_shortcut():
    """'The book that the film directed by Bo is based on' takes two lookups. 'The book that the film
    directed by F's director is based on' looks like three, but its constant F, three layers down, is
    itself the film: one lookup of F reads the answer. Rejected."""
    kg = _kg()
    clean = ws.Proj("film.book", False, ws.Proj("film.director", True, ws.Const("Bo")))  # B1, via F
    assert ws.evaluate(clean, kg) == {"B1"} and ws.shortcut(clean, kg) is None
    leaky = ws.Proj("film.book", False, ws.Proj("film.director", True, ws.Proj("film.director", False, ws.Const("F"))))
    assert ws.evaluate(leaky, kg) == {"B1"} and ws.layers(leaky) == 3
    assert ws.shortcut(leaky, kg) == "'F' (layer 3) is one hop from the answer"


def test_a_conjunct_that_does_not_narrow_is_a_free_hint_and_rejected():
    kg = _kg()
    filmed = ws.Proj("film.book", False, ws.Const("F"))  # {B1} alone
    hint = ws.And((filmed, ws.Proj("book.author", True, ws.Const("Ann"))))
    assert "does not narrow" in ws.shortcut(hint, kg)


def test_layered_expansion_adds_one_layer_and_keeps_the_answer():
    kg, rng = graph_from_world(), random.Random(0)
    answer = next(v for v, k in kg.kinds.items() if k == "book" and ws.describe(v, kg, random.Random(0), {v}))
    spec = ws.describe(answer, kg, rng, {answer})
    assert ws.layers(spec) == 1 and ws.evaluate(spec, kg) == {answer}
    deeper = ws.expand(spec, kg, rng, {answer, *(n for n, _ in ws.leaves(spec))})
    assert deeper is not None and ws.layers(deeper) == 2 and ws.evaluate(deeper, kg) == {answer}


def _brute(spec, facts) -> set[str]:
    """An independent evaluator: a linear scan of the fact list for every projection."""
    if isinstance(spec, ws.Const):
        return {spec.node}
    if isinstance(spec, ws.Proj):
        arg = _brute(spec.of, facts)
        return {(f.subject if spec.inverse else f.object) for f in facts
                if f.relation == spec.relation and (f.object if spec.inverse else f.subject) in arg}
    sets = [_brute(p, facts) for p in spec.parts]
    return set.intersection(*sets) if isinstance(spec, ws.And) else set.union(*sets)


@pytest.mark.parametrize("split", ws.SPLITS)
def test_every_question_has_its_one_answer_its_layers_and_no_shortcut(split):
    kg = graph_from_world()
    tasks = ws.synthesize(60, 3, split)
    assert len(tasks) == 60 and len({t.prompt for t in tasks}) == 60
    passages = {search_qa._slug(e.name): search_qa.passage_text(e) for e in search_qa.world().entities.values()}
    for t in tasks:
        spec = ws.from_json(t.meta["spec"])
        assert _brute(spec, kg.facts) == {t.answer}
        assert ws.layers(spec) == t.meta["layers"] in (2, 3) and ws.shortcut(spec, kg) is None
        assert t.answer not in t.prompt and heldout_entity(t.answer) == (split == "heldout_multihop")
        for subject, _, obj in ws.support(spec, kg):  # each hop is stated by the subject's passage
            assert subject in passages[search_qa._slug(subject)] and obj in passages[search_qa._slug(subject)]
    assert ws.synthesize(60, 3, split) == tasks  # deterministic by seed
    assert ws.synthesize(10, 4, split) != tasks[:10]


def test_the_command_writes_a_task_file_the_search_env_trains_on(tmp_path, capsys):
    """`agentic-rl synth webshaper` writes the file; `search_r1` with `synth_tasks` has a `synth` split
    drawing its questions (scored by the env's own exact-match reward), and a recipe may train on it;
    `heldout_multihop` is held out (no recipe trains on it) and shares no answer with the file."""
    from agentic_rl.cli import main
    from agentic_rl.envs.registry import resolve_env
    from agentic_rl.trainer.checks import check_config
    from agentic_rl.trainer.config import ConfigError, load_config
    from agentic_rl.types import Trajectory, Turn

    out = tmp_path / "ws.jsonl"
    assert main(["synth", "webshaper", "--out", str(out), "--n", "40", "--seed", "2"]) == 0
    assert "wrote 40 questions" in capsys.readouterr().out
    spec = resolve_env("search_r1", {"synth_tasks": str(out)})
    drawn = spec.tasks("synth", 8, 0)
    assert {t.prompt for t in drawn} <= {line for line in out.read_text().split('"') if line.startswith("Name ")}
    right = Trajectory(drawn[0], (Turn((1,), (2,), (-0.1,), f"<answer>{drawn[0].answer}</answer>", "eos"),),
                       terminated=True)
    assert spec.make_reward({})(drawn[0], right).details["correct"] == 1.0
    held = {t.answer for t in spec.tasks("heldout_multihop", 40, 0)}
    assert not held & {t.answer for t in drawn}
    recipe = ["env.name=search_r1", f"env.options={{synth_tasks: {out}}}", "rl.tasks.splits=[train, synth]"]
    check_config(load_config(None, recipe))
    with pytest.raises(ConfigError, match="heldout_multihop' is a held-out or eval split"):
        check_config(load_config(None, [*recipe[:2], "rl.tasks.splits=[train, heldout_multihop]"]))
    assert "synth" not in resolve_env("search_r1", {}).splits  # no file, no split
    assert main(["synth", "webshaper", "--out", str(out), "--split", "test"]) == 2
