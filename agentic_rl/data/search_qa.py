"""Search-R1 data: a generated encyclopedia of a fictional world and one- and two-hop questions on it.

Every name is built from syllables, so no model can know an answer without searching: what the
agent learns is to search, read and chain, not recall. The world is one fixed draw (`WORLD_SEED`);
task seeds only choose questions.

Splits: `train` and `heldout_in` ask the training question templates about disjoint subjects (an
entity's hash decides which split may ask about it); `heldout_out` asks templates and relations never
trained on (other chains, other wordings), a template-level split as in the calculator env.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentic_rl.errors import UserDataError, UserFileError
from agentic_rl.types import Task

WORLD_SEED = 2024
SPLITS = ("train", "heldout_in", "heldout_out")
_SYLLABLES = ("ka ri lo men dar vel to sa nir bel dor fen gal hu is jor lin mo nes or pra ru sel tan ul vor wen "
              "zel ba ce di fo ga ke li mu na pe qui ro su te vi").split()
_JOBS = ("painter", "engineer", "botanist", "sailor", "architect", "physician", "poet", "merchant")


@dataclass
class Entity:
    kind: str
    name: str
    facts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class World:
    entities: dict[str, Entity]  # name -> entity

    def of(self, kind: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.kind == kind]


def _name(rng: random.Random, used: set[str], parts: int) -> str:
    while True:
        name = " ".join("".join(rng.choice(_SYLLABLES) for _ in range(2)).capitalize() for _ in range(parts))
        if name not in used:
            used.add(name)
            return name


@functools.lru_cache(maxsize=1)
def world() -> World:
    rng, used = random.Random(WORLD_SEED), set()
    ents: dict[str, Entity] = {}

    def add(kind: str, parts: int, **facts) -> Entity:
        e = Entity(kind, _name(rng, used, parts), facts)
        ents[e.name] = e
        return e
    countries = [add("country", 1) for _ in range(16)]
    cities = [add("city", 1, country=rng.choice(countries).name) for _ in range(48)]
    people = [add("person", 2, born=rng.choice(cities).name, job=rng.choice(_JOBS), year=str(rng.randint(1850, 1990)))
              for _ in range(160)]
    for _ in range(48):
        add("company", 1, founder=rng.choice(people).name, hq=rng.choice(cities).name, year=str(rng.randint(1880, 2010)))
    books = [add("book", 2, author=rng.choice(people).name, year=str(rng.randint(1880, 2015))) for _ in range(48)]
    for book in rng.sample(books, 40):
        add("film", 2, book=book.name, director=rng.choice(people).name, year=str(int(book.facts["year"]) + rng.randint(1, 30)))
    return World(ents)


def passage_text(e: Entity) -> str:
    f = e.facts
    return {
        "country": lambda: f"{e.name} is a country. Its cities include {', '.join(c.name for c in world().of('city') if c.facts['country'] == e.name)[:200] or 'none on record'}.",
        "city": lambda: f"{e.name} is a city in {f['country']}.",
        "person": lambda: f"{e.name} (born {f['year']}) is a {f['job']}. {e.name} was born in the city of {f['born']}.",
        "company": lambda: f"{e.name} is a company founded in {f['year']} by {f['founder']}. Its headquarters are in {f['hq']}.",
        "book": lambda: f"{e.name} is a book written by {f['author']}, first published in {f['year']}.",
        "film": lambda: f"{e.name} is a film from {f['year']} directed by {f['director']}. It is based on the book {f['book']}.",
    }[e.kind]()


# ----------------------------------------------------------------------------- corpus
def kb_passages() -> list:
    from agentic_rl.tools.search import Passage

    return [Passage(_slug(e.name), e.name, passage_text(e)) for e in world().entities.values()]


def load_corpus(source: str = "kb") -> list:
    """"kb" (the generated encyclopedia) or a JSONL file with `id`, `title`, `text` on every line."""
    from agentic_rl.tools.search import Passage

    if source == "kb":
        return kb_passages()
    path = Path(source)
    if not path.exists():
        raise UserFileError(f"corpus file not found: {path}")
    passages = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            passages.append(Passage(str(row["id"]), str(row.get("title", "")), str(row["text"])))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise UserDataError(f"{path}:{n}: expected a JSON object with 'id' and 'text' ({type(e).__name__}: {e})") from None
    return passages


def _slug(name: str) -> str:
    return re.sub(r"\W+", "-", name.lower()).strip("-")


# ----------------------------------------------------------------------------- questions
@dataclass(frozen=True)
class Template:
    id: str
    subject: str  # entity kind asked about
    chain: tuple[str, ...]  # fact keys followed from the subject; the last value is the answer
    wordings: tuple[str, ...]


TRAIN_TEMPLATES = (
    Template("birthplace", "person", ("born",), ("In which city was {s} born?", "Where was {s} born?")),
    Template("founder", "company", ("founder",), ("Who founded {s}?", "Who is the founder of {s}?")),
    Template("author", "book", ("author",), ("Who wrote the book {s}?", "Who is the author of {s}?")),
    Template("city_country", "city", ("country",), ("In which country is {s}?", "{s} is a city in which country?")),
    Template("director", "film", ("director",), ("Who directed the film {s}?", "Who was the director of {s}?")),
    Template("founder_birthplace", "company", ("founder", "born"),
             ("In which city was the founder of {s} born?", "Where was the person who founded {s} born?")),
    Template("film_book_author", "film", ("book", "author"),
             ("Who wrote the book that the film {s} is based on?", "The film {s} is based on a book. Who wrote that book?")),
)
HELDOUT_TEMPLATES = (
    Template("company_year", "company", ("year",), ("In what year was {s} founded?",)),
    Template("hq_country", "company", ("hq", "country"), ("In which country does {s} have its headquarters?",)),
    Template("author_birthplace", "book", ("author", "born"), ("What is the birthplace of the author of {s}?",)),
    Template("director_birthplace", "film", ("director", "born"), ("The director of {s} was born in which city?",)),
    Template("birth_country", "person", ("born", "country"), ("Which country was {s} born in?",)),
)
# fact key -> (what the demonstrator says it needs, the words its query adds to the entity's name)
_RELATIONS = {
    "born": ("where {x} was born", "born"), "founder": ("who founded {x}", "founder"),
    "author": ("who wrote {x}", "author"), "country": ("which country {x} is in", "country"),
    "director": ("who directed {x}", "director"), "book": ("which book {x} is based on", "based on book"),
    "year": ("when {x} was founded", "founded"), "hq": ("where {x} has its headquarters", "headquarters"),
}


def make_tasks(n: int, seed: int, split: str) -> list[Task]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    templates = HELDOUT_TEMPLATES if split == "heldout_out" else TRAIN_TEMPLATES
    rng = random.Random(f"search_r1/{split}/{seed}")
    tasks = []
    for i in range(n):
        t = rng.choice(templates)
        subject = rng.choice(_subjects(t.subject, split))
        chain, x = [], subject.name
        for key in t.chain:
            value = world().entities[x].facts[key]
            chain.append((x, key, value))
            x = value
        tasks.append(Task(f"search_r1-{split}-{seed}-{i}", rng.choice(t.wordings).format(s=subject.name), x,
                          {"template": t.id, "hops": len(t.chain), "chain": chain, "aliases": [],
                           "gold_passages": [_slug(e) for e, _, _ in chain]}))
    return tasks


def _subjects(kind: str, split: str) -> list[Entity]:
    """Train and heldout_in ask about disjoint subjects: a tenth of each kind is held out by name hash."""
    ents = world().of(kind)
    if split == "heldout_out":
        return ents
    held = [e for e in ents if int(hashlib.sha256(e.name.encode()).hexdigest(), 16) % 10 == 0]
    return held if split == "heldout_in" else [e for e in ents if e not in held]


def demonstration(task: Task, search) -> list[dict]:
    """Search for each hop with the entity's name and the relation, read the real result (`search`
    is the env's tool), answer. Falls back to the bare name if the first query misses the entity."""
    messages, learned = [], []
    for entity, key, value in task.meta["chain"]:
        need, words = _RELATIONS[key]
        query = f"{entity} {words}"
        result = search(query)
        if f"({entity})" not in result:
            query, result = entity, search(entity)
        prefix = " ".join(learned)
        think = f"{prefix} Now I need to find {need.format(x=entity)}." if prefix else f"I need to find {need.format(x=entity)}."
        messages += [{"role": "assistant", "content": f"<think>{think}</think>",
                      "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": query}}}]},
                     {"role": "tool", "name": "search", "content": result}]
        learned.append(_fact_sentence(entity, key, value))
    final = f"<think>{' '.join(learned)}</think>\n<answer>{task.answer}</answer>"
    return [*messages, {"role": "assistant", "content": final}]


def _fact_sentence(entity: str, key: str, value: str) -> str:
    return {"born": "{e} was born in {v}.", "founder": "{e} was founded by {v}.", "author": "{e} was written by {v}.",
            "country": "{e} is in {v}.", "director": "{e} was directed by {v}.", "book": "{e} is based on {v}.",
            "year": "{e} was founded in {v}.", "hq": "{e} has its headquarters in {v}."}[key].format(e=entity, v=value)


# ----------------------------------------------------------------------------- scoring (SQuAD conventions)
def normalize_answer(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(pred: str, golds: Sequence[str]) -> float:
    return float(any(normalize_answer(pred) == normalize_answer(g) for g in golds))


def token_f1(pred: str, golds: Sequence[str]) -> float:
    return max((_f1(normalize_answer(pred).split(), normalize_answer(g).split()) for g in golds), default=0.0)


def _f1(pred: list[str], gold: list[str]) -> float:
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)
