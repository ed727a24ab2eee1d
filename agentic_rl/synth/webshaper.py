"""WebShaper's formal multi-hop questions (Tao et al., 2025), on a knowledge graph we ship.

A question is a formal specification first and text second. A spec is a set expression over the
graph (`graph.py`): a constant `Const(node)`, a knowledge projection `Proj(relation, inverse, of)`,
and their intersection `And` and union `Or`; `evaluate` gives its answer set. **Layered expansion**
grows a question one projection at a time: the answer is first described by a projection of a
constant (one layer: one retrieval), then a constant of the spec is replaced by a description of
it (one more layer: one more retrieval), until the spec has the layers asked for. A spec is kept
only when:

- its answer set is the one entity it was grown from (verified against the graph);
- it has **no logical shortcut**: no constant below the first layer is one hop from the answer
  (a single lookup from it would skip the layers in between), and no conjunct of an `And` can be
  dropped without widening the answer set (a redundant constraint is a free hint);
- every hop is grounded: each fact the spec uses is stated by a passage of the corpus.

`render` turns a spec into a question from clause templates; the answer never appears in it.
`synthesize(n, seed, split)` draws questions: `train` answers only with entities the Search-R1 env
trains on, `heldout_multihop` only with its held-out ones (`graph.heldout_entity`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from agentic_rl.synth.graph import KnowledgeGraph, graph_from_world, heldout_entity
from agentic_rl.types import Task


@dataclass(frozen=True)
class Const:
    node: str


@dataclass(frozen=True)
class Proj:
    relation: str
    inverse: bool  # False: R(V), the objects of V's facts; True: R⁻(V), the subjects of facts about V
    of: Spec


@dataclass(frozen=True)
class And:
    parts: tuple[Spec, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Spec, ...]


Spec = Const | Proj | And | Or

# (relation, inverse) -> the clause describing a member of the projection, around the phrase of its argument
CLAUSES = {
    ("person.born", False): "where {x} was born", ("person.born", True): "born in {x}",
    ("person.job", True): "who works as {x}", ("person.year", True): "born in the year {x}",
    ("city.country", False): "that {x} is in", ("city.country", True): "in {x}",
    ("company.founder", False): "who founded {x}", ("company.founder", True): "founded by {x}",
    ("company.hq", False): "where {x} has its headquarters", ("company.hq", True): "headquartered in {x}",
    ("company.year", True): "founded in the year {x}",
    ("book.author", False): "who wrote {x}", ("book.author", True): "written by {x}",
    ("book.year", True): "first published in {x}",
    ("film.book", False): "that {x} is based on", ("film.book", True): "based on {x}",
    ("film.director", False): "who directed {x}", ("film.director", True): "directed by {x}",
    ("film.year", True): "released in {x}",
}
ANSWER_KINDS = ("person", "city", "country", "company", "book", "film")
VALUE_KINDS = ("year", "job")  # literal nodes: constants, never answers, never described further


def evaluate(spec: Spec, kg: KnowledgeGraph) -> frozenset[str]:
    if isinstance(spec, Const):
        return frozenset((spec.node,))
    if isinstance(spec, Proj):
        return kg.project(spec.relation, evaluate(spec.of, kg), spec.inverse)
    sets = [evaluate(p, kg) for p in spec.parts]
    return frozenset.intersection(*sets) if isinstance(spec, And) else frozenset.union(*sets)


def layers(spec: Spec) -> int:
    """Projections on the longest path from the question to a constant: the retrievals it takes."""
    if isinstance(spec, Const):
        return 0
    if isinstance(spec, Proj):
        return 1 + layers(spec.of)
    return max(layers(p) for p in spec.parts)


def leaves(spec: Spec, depth: int = 0) -> list[tuple[str, int]]:
    """Every constant with the number of projections above it."""
    if isinstance(spec, Const):
        return [(spec.node, depth)]
    if isinstance(spec, Proj):
        return leaves(spec.of, depth + 1)
    return [leaf for p in spec.parts for leaf in leaves(p, depth)]


def one_hop(kg: KnowledgeGraph, node: str) -> set[str]:
    return {f.object if f.subject == node else f.subject for f in kg.facts_of(node)}


def shortcut(spec: Spec, kg: KnowledgeGraph) -> str | None:
    """Why `spec` can be answered without all its layers, or None: a constant below the first layer
    one hop from an answer, or an `And` conjunct that can be dropped with the same answers."""
    answers = evaluate(spec, kg)
    for node, depth in leaves(spec):
        if depth >= 2 and one_hop(kg, node) & answers:
            return f"{node!r} (layer {depth}) is one hop from the answer"
    return _redundant(spec, kg)


def _redundant(spec: Spec, kg: KnowledgeGraph) -> str | None:
    if isinstance(spec, Proj):
        return _redundant(spec.of, kg)
    if isinstance(spec, And):
        whole = evaluate(spec, kg)
        for k in range(len(spec.parts)):
            rest = spec.parts[:k] + spec.parts[k + 1:]
            if rest and evaluate(rest[0] if len(rest) == 1 else And(rest), kg) == whole:
                return f"conjunct {k + 1} of an intersection does not narrow its answers"
        return next((why for p in spec.parts if (why := _redundant(p, kg))), None)
    if isinstance(spec, Or):
        return next((why for p in spec.parts if (why := _redundant(p, kg))), None)
    return None


def support(spec: Spec, kg: KnowledgeGraph, keep: frozenset[str] | None = None) -> list[tuple[str, str, str]]:
    """The facts (subject, relation, object) that put the members `keep` (default: every answer) in
    the spec's answer set: each projection's links from its argument to them, then the argument's
    support for the nodes linked: the hops an agent reads on its way to the answer."""
    keep = evaluate(spec, kg) if keep is None else keep
    if isinstance(spec, Const):
        return []
    if isinstance(spec, Proj):
        facts, linked = [], set()
        for x in evaluate(spec.of, kg):
            for y in kg.project(spec.relation, [x], spec.inverse) & keep:
                facts.append((y, spec.relation, x) if spec.inverse else (x, spec.relation, y))
                linked.add(x)
        return facts + support(spec.of, kg, frozenset(linked))
    return [f for p in spec.parts for f in support(p, kg, keep & evaluate(p, kg))]


def grounded(spec: Spec, kg: KnowledgeGraph) -> bool:
    """Every hop of the spec's support is stated by a passage of the corpus."""
    return all(kg.passage(*f) is not None for f in support(spec, kg))


def describe(node: str, kg: KnowledgeGraph, rng: random.Random, avoid: set[str]) -> Spec | None:
    """A one-layer spec whose only answer is `node`: one projection of a constant, or the intersection
    of two when no single one is unique; constants in `avoid` are not used."""
    candidates = []
    for f in kg.facts_of(node):
        inverse, const = (True, f.object) if f.subject == node else (False, f.subject)
        if (f.relation, inverse) in CLAUSES and const not in avoid:
            candidates.append(Proj(f.relation, inverse, Const(const)))
    rng.shuffle(candidates)
    target = frozenset((node,))
    for c in candidates:
        if evaluate(c, kg) == target:
            return c
    for i, a in enumerate(candidates):
        for b in candidates[i + 1:]:
            pair = And((a, b))
            if evaluate(pair, kg) == target and _redundant(pair, kg) is None:
                return pair
    return None


def expand(spec: Spec, kg: KnowledgeGraph, rng: random.Random, avoid: set[str]) -> Spec | None:
    """`spec` one layer deeper: its deepest expandable constant replaced by a description of it."""
    depth = max((d for n, d in leaves(spec) if kg.kinds.get(n) not in VALUE_KINDS), default=None)
    if depth is None:
        return None
    node = rng.choice(sorted(n for n, d in leaves(spec) if d == depth and kg.kinds.get(n) not in VALUE_KINDS))
    description = describe(node, kg, rng, avoid | {node})
    return None if description is None else _replace(spec, node, description)


def _replace(spec: Spec, node: str, by: Spec) -> Spec:
    if isinstance(spec, Const):
        return by if spec.node == node else spec
    if isinstance(spec, Proj):
        return Proj(spec.relation, spec.inverse, _replace(spec.of, node, by))
    return type(spec)(tuple(_replace(p, node, by) for p in spec.parts))


def phrase(spec: Spec, kg: KnowledgeGraph) -> str:
    if isinstance(spec, Const):
        if kg.kinds.get(spec.node) == "job":
            return f"{'an' if spec.node[0] in 'aeiou' else 'a'} {spec.node}"
        return spec.node
    kind = kg.kinds[next(iter(evaluate(spec, kg)))]
    return f"the {kind} {' and '.join(_clauses(spec, kg))}"


def _clauses(spec: Spec, kg: KnowledgeGraph) -> list[str]:
    if isinstance(spec, Proj):
        return [CLAUSES[spec.relation, spec.inverse].format(x=phrase(spec.of, kg))]
    joined = [c for p in spec.parts for c in _clauses(p, kg)]
    return joined if isinstance(spec, And) else [" or ".join(joined)]


def render(spec: Spec, kg: KnowledgeGraph) -> str:
    return f"Name {phrase(spec, kg)}."


def to_json(spec: Spec) -> dict:
    if isinstance(spec, Const):
        return {"const": spec.node}
    if isinstance(spec, Proj):
        return {"proj": spec.relation, "inverse": spec.inverse, "of": to_json(spec.of)}
    return {"and" if isinstance(spec, And) else "or": [to_json(p) for p in spec.parts]}


def from_json(d: dict) -> Spec:
    if "const" in d:
        return Const(d["const"])
    if "proj" in d:
        return Proj(d["proj"], bool(d["inverse"]), from_json(d["of"]))
    return And(tuple(map(from_json, d["and"]))) if "and" in d else Or(tuple(map(from_json, d["or"])))


def grow(answer: str, n_layers: int, kg: KnowledgeGraph, rng: random.Random) -> Spec | None:
    """A spec of `n_layers` layers whose only answer is `answer`, with no shortcut, grounded; or None."""
    spec = describe(answer, kg, rng, {answer})
    while spec is not None and layers(spec) < n_layers:
        spec = expand(spec, kg, rng, {answer, *(n for n, _ in leaves(spec))})
    if spec is None or layers(spec) != n_layers or evaluate(spec, kg) != {answer}:
        return None
    return spec if shortcut(spec, kg) is None and grounded(spec, kg) else None


SPLITS = ("train", "heldout_multihop")


def synthesize(n: int, seed: int, split: str = "train", layer_choices: Sequence[int] = (2, 3),
               kg: KnowledgeGraph | None = None) -> list[Task]:
    """`n` distinct questions, deterministic by seed; answers from the split's entities."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    kg = kg or graph_from_world()
    pool = sorted(v for v, k in kg.kinds.items() if k in ANSWER_KINDS and heldout_entity(v) == (split != "train"))
    rng, tasks, seen = random.Random(f"webshaper/{split}/{seed}"), [], set()
    for _ in range(n * 50):
        if len(tasks) == n:
            break
        answer, depth = rng.choice(pool), rng.choice(list(layer_choices))
        spec = grow(answer, depth, kg, rng)
        if spec is None or (question := render(spec, kg)) in seen or answer in question:
            continue
        seen.add(question)
        passages = sorted({kg.passage(*f) for f in support(spec, kg)})
        tasks.append(Task(f"webshaper-{split}-{seed}-{len(tasks)}", question, answer,
                          {"template": "webshaper", "layers": depth, "hops": depth, "spec": to_json(spec),
                           "aliases": [], "gold_passages": passages}))
    return tasks
