"""A knowledge graph of facts, each with the passage that states it, and its knowledge projections.

`Fact(subject, relation, object, passage)`; a relation is named by its subject's kind and the fact's
key (`book.author`), so the same key of two kinds (`person.year`, `film.year`) are two relations.
A knowledge projection (WebShaper, Tao et al. 2025) maps a set of entities V to the set of entities
related to some member of V: forward, R(V) = {o : (s, R, o), s in V}; inverse, R⁻(V) = {s : (s, R, o),
o in V}. `graph_from_world()` builds the graph of the Search-R1 env's generated world
(`data/search_qa.py`), where the subject's own encyclopedia passage states every fact.
"""

from __future__ import annotations

import functools
import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    subject: str
    relation: str  # "<subject kind>.<key>"
    object: str
    passage: str  # the id of the passage that states it


class KnowledgeGraph:
    def __init__(self, facts: Iterable[Fact], kinds: dict[str, str]):
        self.facts = tuple(facts)
        self.kinds = dict(kinds)  # node -> kind ("person", "city", ..., "year", "job" for values)
        self._forward: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._inverse: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._passage: dict[tuple[str, str, str], str] = {}
        for f in self.facts:
            self._forward[f.relation, f.subject].add(f.object)
            self._inverse[f.relation, f.object].add(f.subject)
            self._passage[f.subject, f.relation, f.object] = f.passage
        self.relations = tuple(sorted({f.relation for f in self.facts}))

    def project(self, relation: str, nodes: Iterable[str], inverse: bool = False) -> frozenset[str]:
        """R(V) (forward) or R⁻(V) (inverse)."""
        index = self._inverse if inverse else self._forward
        return frozenset(x for v in nodes for x in index.get((relation, v), ()))

    def passage(self, subject: str, relation: str, obj: str) -> str | None:
        return self._passage.get((subject, relation, obj))

    def facts_of(self, node: str) -> list[Fact]:
        """The facts `node` takes part in, as subject or object."""
        return [f for f in self.facts if node in (f.subject, f.object)]


def heldout_entity(name: str) -> bool:
    """The Search-R1 split rule: a tenth of the entities, by name hash, are only ever asked in held-out splits."""
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % 10 == 0


@functools.lru_cache(maxsize=1)
def graph_from_world() -> KnowledgeGraph:
    from agentic_rl.data import search_qa

    world = search_qa.world()
    kinds, facts = {}, []
    value_kind = {"year": "year", "job": "job"}
    for e in world.entities.values():
        kinds[e.name] = e.kind
        for key, value in e.facts.items():
            kinds.setdefault(value, value_kind.get(key, world.entities[value].kind if value in world.entities else key))
            facts.append(Fact(e.name, f"{e.kind}.{key}", value, search_qa._slug(e.name)))
    return KnowledgeGraph(facts, kinds)
