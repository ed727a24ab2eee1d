"""Search-R1 data: one- and two-hop questions about the generated encyclopedia (`search_kb`), the
corpus the retriever indexes, demonstrations for the SFT cold start, and SQuAD-style answer scoring.

Splits (a template-level split, as in the calculator env):
  train        training templates and wordings, about entities of the world's "train" group
  heldout_in   the same templates and wordings, about "heldout" entities: no passage a heldout_in
               question needs (subject or bridge) is needed by any train question
  heldout_out  templates (new relations and chains) and wordings of the training templates that
               train never uses, about any entity
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentic_rl.data.search_kb import World, world
from agentic_rl.tools.search import DEFAULT_MAX_CHARS, DEFAULT_TOP_K, BM25Retriever, Passage, format_passages
from agentic_rl.types import Task

SPLITS = ("train", "heldout_in", "heldout_out")


@dataclass(frozen=True)
class Template:
    id: str
    subject: str  # entity kind asked about
    chain: tuple[str, ...]  # fact keys followed from the subject; the last value is the answer
    wordings: tuple[str, ...]  # asked in train and heldout_in ({s} is the subject's name)
    heldout_wordings: tuple[str, ...] = ()  # asked only in heldout_out

    def wording_id(self, wording: str) -> str:
        return f"{self.id}/{(*self.wordings, *self.heldout_wordings).index(wording)}"


TRAIN_TEMPLATES = (
    Template("birthplace", "person", ("born",), ("In which city was {s} born?", "Where was {s} born?",
             "What is the birthplace of {s}?"), ("{s} came into the world in which city?",)),
    Template("founder", "company", ("founder",), ("Who founded {s}?", "Who is the founder of {s}?"),
             ("Which person started the firm {s}?",)),
    Template("author", "book", ("author",), ("Who wrote {s}?", "Who is the author of {s}?"),
             ("{s} came from whose pen?",)),
    Template("director", "film", ("director",), ("Who directed the film {s}?", "Who was the director of {s}?"),
             ("Name the director of the film {s}.",)),
    Template("city_country", "city", ("country",), ("In which country is {s}?", "{s} is a city in which country?"),
             ("Which nation is {s} part of?",)),
    Template("capital", "country", ("capital",), ("What is the capital of {s}?", "Which city is the capital of {s}?"),
             ("{s} is governed from which city?",)),
    Template("river_country", "river", ("country",), ("In which country is the {s}?",
             "Through which country does the {s} flow?"), ("The {s} belongs to which country?",)),
    Template("mountain_country", "mountain", ("country",), ("In which country is {s}?",
             "{s} is a mountain in which country?"), ("Which country is home to {s}?",)),
    Template("founder_birthplace", "company", ("founder", "born"), ("In which city was the founder of {s} born?",
             "Where was the person who founded {s} born?"), ("The founder of {s} was born in which city?",)),
    Template("film_book_author", "film", ("book", "author"), ("Who wrote the book that the film {s} is based on?",
             "The film {s} is based on a book. Who wrote that book?"), ("Who is the author of the book behind {s}?",)),
    Template("book_film_director", "book", ("film", "director"), ("Who directed the film based on {s}?",
             "{s} was made into a film. Who directed it?"), ("Who directed the screen adaptation of {s}?",)),
)
HELDOUT_TEMPLATES = (
    Template("company_year", "company", ("year",), ("In what year was {s} founded?", "When was {s} established?")),
    Template("ceo", "company", ("ceo",), ("Who is the chief executive of {s}?", "Who runs {s} today?")),
    Template("founder_birth_country", "company", ("founder", "born_country"),
             ("In which country is the birthplace of the founder of {s}?", "The founder of {s} was born in which country?")),
    Template("hq_country", "company", ("hq", "country"), ("In which country does {s} have its headquarters?",
             "{s} is headquartered in a city of which country?")),
    Template("author_birthplace", "book", ("author", "born"), ("What is the birthplace of the author of {s}?",
             "Where was the writer of {s} born?")),
    Template("director_birthplace", "film", ("director", "born"), ("The director of {s} was born in which city?",
             "Where was the director of the film {s} born?")),
    Template("river_capital", "river", ("country", "capital"), ("What is the capital of the country the {s} is in?",
             "The {s} flows through a country; what is its capital?")),
)
# fact key -> (what the demonstrator says it needs, the words its query adds to the entity's name,
#              the sentence stating the fact once read)
_RELATIONS = {
    "born": ("where {x} was born", "born", "{x} was born in {v}."),
    "born_country": ("in which country {x} was born", "born country", "{x} was born in {v}."),
    "founder": ("who founded {x}", "founder", "{x} was founded by {v}."),
    "ceo": ("who runs {x}", "chief executive", "{x} is run by {v}."),
    "year": ("when {x} was founded", "founded", "{x} was founded in {v}."),
    "hq": ("where {x} has its headquarters", "headquarters", "{x} has its headquarters in {v}."),
    "author": ("who wrote {x}", "author", "{x} was written by {v}."),
    "director": ("who directed {x}", "director", "{x} was directed by {v}."),
    "book": ("which book {x} is based on", "book", "{x} is based on the book {v}."),
    "film": ("which film was made from {x}", "film", "{x} was adapted into the film {v}."),
    "country": ("which country {x} is in", "country", "{x} is in {v}."),
    "capital": ("the capital of {x}", "capital", "The capital of {x} is {v}."),
}


# ----------------------------------------------------------------------------- questions
def make_tasks(n: int, seed: int, split: str, kb_seed: int = 0) -> list[Task]:
    """`n` questions about the world of `kb_seed`, half one-hop and half two-hop in expectation,
    deterministic for (n, seed, split, kb_seed). The prompt is the question alone."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    w, rng = world(kb_seed), random.Random(f"search_qa/{split}/{seed}")
    pairs = _template_wordings(split)
    group = {"train": "train", "heldout_in": "heldout", "heldout_out": None}[split]
    tasks = []
    for i in range(n):
        hops = rng.choice((1, 2))
        template, wording = rng.choice([(t, wd) for t, wd in pairs if len(t.chain) == hops])
        subject = rng.choice(_subjects(w, template, group))
        tasks.append(_task(w, template, wording, subject, f"search_r1-{split}-{seed}-{i}"))
    return tasks


def _template_wordings(split: str) -> list[tuple[Template, str]]:
    if split == "heldout_out":
        return [(t, wd) for t in HELDOUT_TEMPLATES for wd in t.wordings] + [
            (t, wd) for t in TRAIN_TEMPLATES for wd in t.heldout_wordings]
    return [(t, wd) for t in TRAIN_TEMPLATES for wd in t.wordings]


def _subjects(w: World, template: Template, group: str | None) -> list[str]:
    """Entities of the template's kind (in `group`, if given) that have every fact of its chain."""
    out = []
    for e in w.of(template.subject, group):
        x = e.name
        for key in template.chain:
            x = w.entities[x].facts.get(key) if x in w.entities else None
        if x is not None:
            out.append(e.name)
    return out


def _task(w: World, template: Template, wording: str, subject: str, task_id: str) -> Task:
    chain, x = [], subject
    for key in template.chain:
        value = w.entities[x].facts[key]
        chain.append([x, key, value])
        x = value
    answer_entity = w.entities.get(x)
    meta = {"hops": len(chain), "template": template.id, "wording": template.wording_id(wording),
            "gold_passages": [w.entities[e].passage_id for e, _, _ in chain],
            "aliases": list(answer_entity.aliases) if answer_entity else [], "chain": chain}
    return Task(task_id, wording.format(s=subject), x, meta)


# ----------------------------------------------------------------------------- demonstrations
def demonstration(task: Task, retriever: BM25Retriever, top_k: int = DEFAULT_TOP_K,
                  max_chars: int = DEFAULT_MAX_CHARS) -> list[dict]:
    """The messages after the user turn that solve `task` in the tag protocol: per hop an assistant
    `<think>…</think>\\n<search>query</search>` and a tool message holding exactly what the env shows
    (`format_passages(retriever.search(query, top_k), max_chars)`), then `<think>…</think>\\n<answer>…`.

    Each query is the entity's name plus the relation's words; it must retrieve the hop's gold passage
    with the fact visible within the budget, else the bare name is tried, else this raises."""
    messages, learned = [], []
    hops = zip(task.meta["chain"], task.meta["gold_passages"], demonstration_queries(task))
    for (entity, key, value), gold, first_choice in hops:
        need, _, fact = _RELATIONS[key]
        query, shown = _working_query(retriever, [first_choice, entity], gold, value, top_k, max_chars)
        think = f"{' '.join(learned)} Now I need to find {need}." if learned else f"I need to find {need}."
        messages += [{"role": "assistant", "content": f"<think>{think.format(x=entity)}</think>\n<search>{query}</search>"},
                     {"role": "tool", "content": shown}]
        learned.append(fact.format(x=entity, v=value))
    answer = f"<think>{' '.join(learned)}</think>\n<answer>{task.answer}</answer>"
    return [*messages, {"role": "assistant", "content": answer}]


def demonstration_queries(task: Task) -> list[str]:
    """The demonstrator's first-choice query for each hop: the entity's name and the relation's words."""
    return [f"{entity} {_RELATIONS[key][1]}" for entity, key, _ in task.meta["chain"]]


def _working_query(retriever: BM25Retriever, queries: Sequence[str], gold: str, value: str,
                   top_k: int, max_chars: int) -> tuple[str, str]:
    """The first query whose results include passage `gold` and show `value`, and what it shows."""
    for query in queries:
        found = retriever.search(query, top_k)
        shown = format_passages(found, max_chars)
        if any(p.id == gold for p in found) and value in shown:
            return query, shown
    raise RuntimeError(f"no demonstration query retrieves {gold!r} showing {value!r} (tried {list(queries)}, "
                       f"top_k={top_k}, max_chars={max_chars}): is the corpus the knowledge base these tasks ask about?")


# ----------------------------------------------------------------------------- corpus
def load_corpus(source: str, seed: int = 0, wiki_distractors: int = 0, wiki_dump: str | None = None) -> list[Passage]:
    """The passages to index: `source` is "kb" (the generated encyclopedia of world `seed`) or a JSONL
    file with `id`, `title` and `text` on every line. `wiki_distractors` real Wikipedia passages
    (drawn with `seed` from gensim's test dump, see `wiki_distractors.py`; `wiki_dump` locates it)
    are appended: text the agent must learn to read past."""
    passages = world(seed).passages() if source == "kb" else _read_jsonl(Path(source))
    if wiki_distractors > 0:
        from agentic_rl.data.wiki_distractors import wiki_passages

        pool = wiki_passages(wiki_dump)
        if wiki_distractors > len(pool):
            raise ValueError(f"asked for {wiki_distractors} Wikipedia distractors; the dump has {len(pool)} passages")
        passages += random.Random(f"wiki/{seed}").sample(pool, wiki_distractors)
    return passages


def _read_jsonl(path: Path) -> list[Passage]:
    if not path.is_file():
        raise FileNotFoundError(f"corpus file not found: {path} (the source is 'kb' or a JSONL file)")
    passages, seen = [], set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not valid JSON ({e.msg})") from None
        problem = _row_problem(row, seen)
        if problem:
            raise ValueError(f"{path}:{n}: {problem}")
        seen.add(str(row["id"]))
        passages.append(Passage(str(row["id"]), row["title"], row["text"]))
    if not passages:
        raise ValueError(f"{path}: no passages")
    return passages


def _row_problem(row, seen: set[str]) -> str | None:
    """Why a parsed JSONL line is not a passage, or None."""
    if not isinstance(row, dict):
        return f"expected a JSON object with 'id', 'title' and 'text', got {type(row).__name__}"
    missing = [k for k in ("id", "title", "text") if k not in row]
    if missing:
        return f"missing {', '.join(repr(k) for k in missing)} (each line needs 'id', 'title' and 'text')"
    if not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
        return f"'id' must be a string or an integer, got {type(row['id']).__name__}"
    if not isinstance(row["title"], str) or not isinstance(row["text"], str):
        return "'title' and 'text' must be strings"
    if not row["text"].strip():
        return "'text' is empty"
    if str(row["id"]) in seen:
        return f"duplicate id {row['id']!r}"
    return None


# ----------------------------------------------------------------------------- scoring (SQuAD conventions)
def normalize_answer(s: str) -> str:
    """Lowercase, drop punctuation, the articles a/an/the and extra whitespace (SQuAD v1.1's rule)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


_PUNCTUATION = frozenset(string.punctuation)


def exact_match(pred: str, golds: Sequence[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold answer or alias."""
    return float(any(normalize_answer(pred) == normalize_answer(g) for g in golds))


def token_f1(pred: str, golds: Sequence[str]) -> float:
    """Best bag-of-tokens F1 over the gold answers and aliases (0.0 with no golds)."""
    return max((_f1(normalize_answer(pred).split(), normalize_answer(g).split()) for g in golds), default=0.0)


def _f1(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:  # SQuAD v2: two empty answers agree, one empty answer scores 0
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)
