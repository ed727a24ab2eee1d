"""The generated encyclopedia: seeded, one passage per entity stating its facts, references that
resolve, and question chains that never cross from the train group to the heldout group."""

from __future__ import annotations

from collections import Counter

from agentic_rl.data.search_kb import SIZES, world

# fact key -> kind of the entity it names
_REFERENCES = {"born": "city", "home": "city", "born_country": "country", "sibling": "person", "founder": "person",
               "ceo": "person", "hq": "city", "author": "person", "setting": "city", "film": "film", "book": "book",
               "director": "person", "star": "person", "filmed": "city", "country": "country", "capital": "city",
               "largest": "city", "neighbour": "country", "twin": "city", "twin_country": "country",
               "through": "city", "climber": "person"}


def test_world_is_seeded():
    assert world.__wrapped__(0) == world(0) and world(1) != world(0)
    assert Counter(e.kind for e in world(0).entities.values()) == SIZES


def test_references_resolve_and_passages_state_the_facts():
    w = world(0)
    for e in w.entities.values():
        text = w.texts[e.name]
        assert e.name in text
        for key, value in e.facts.items():
            if key in _REFERENCES:
                assert w.entities[value].kind == _REFERENCES[key], (e.name, key)
            assert value in text, (e.name, key)  # every fact is readable in the passage


def test_chain_facts_stay_in_one_group():
    w = world(0)
    for e in w.entities.values():
        for key in ("founder", "book", "film"):
            if key in e.facts:
                assert w.entities[e.facts[key]].group == e.group, (e.name, key)
    assert {e.group for e in w.entities.values()} == {"train", "heldout"}


def test_names_are_unique_words():
    w = world(0)
    words = Counter(word for e in w.entities.values() if e.kind != "person" for word in e.name.split())
    generic = {"The", "of", "Songs", "Letters", "A", "Winter", "in", "Beyond", "Affair", "Return", "to", "Rising",
               "Night", "over", "River", "Mount", "Industries", "Works", "Holdings", "Trading", "Foundry", "Press",
               "Motors", "Mills"}
    assert all(n == 1 for word, n in words.items() if word not in generic)
    first_names = Counter(e.name.split()[0] for e in w.of("person"))
    assert max(first_names.values()) == 1 and not set(first_names) & set(words)


def test_countries_have_a_capital_of_their_own_and_an_official_name():
    w = world(0)
    for c in w.of("country"):
        assert w.entities[c.facts["capital"]].facts["country"] == c.name != c.facts["neighbour"]
        assert c.facts["capital"] != c.facts["largest"] and c.aliases[0].endswith(f" of {c.name}")
