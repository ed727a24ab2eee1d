"""Questions with gold SQL over the generated databases (`sql_schemas.py`), in graded difficulty:

  easy     a filter (`WHERE`), a count;
  medium   an aggregate, a grouping, a join through the event table;
  hard     a join with grouping and ordering, a nested query.

The question speaks the domain's words ("customers", "city"), never the schema's names: the agent
lists and describes the tables to find them. Answers are result sets of the gold query, compared as
multisets unless the gold query orders them (`rewards.verifiers.SQLVerifier`).

Splits are by database: `train` and `heldout_in` draw databases of the four training domains with
disjoint seeds (so a held-out database has its own names and rows), `heldout_out` those of two
domains never trained on (travel, league).
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable

from agentic_rl.data.sql_schemas import Database, database
from agentic_rl.types import Task

SPLITS = ("train", "heldout_in", "heldout_out")
TRAIN_DOMAINS, OUT_DOMAINS = ("shop", "library", "school", "clinic"), ("travel", "league")
DATABASE_SEEDS = {"train": range(0, 1000), "heldout_in": range(1_000_000, 1_001_000), "heldout_out": range(0, 1000)}

Question = tuple[str, str]  # (question, gold SQL)


def _count_above(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    v = rng.randint(*d.a.number_range)
    return (f"How many {d.a.noun} have a {d.a.number_word} above {v}?",
            f"SELECT COUNT(*) FROM {n.a} WHERE {n.a_number} > {v}")


def _names_in(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    v = rng.choice(d.a.values)
    return (f"List the names of the {d.a.noun} whose {d.a.text_word} is {v}.",
            f"SELECT {n.a_name} FROM {n.a} WHERE {n.a_text} = '{v}'")


def _average(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    v = rng.choice(d.b.values)
    return (f"What is the average {d.b.number_word} of the {d.b.noun} in the {d.b.text_word} {v}, rounded to 2 "
            f"decimals?", f"SELECT ROUND(AVG({n.b_number}), 2) FROM {n.b} WHERE {n.b_text} = '{v}'")


def _per_group(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    return (f"For each {d.b.text_word}, how many {d.b.noun} are there? Give the {d.b.text_word} and the count.",
            f"SELECT {n.b_text}, COUNT(*) FROM {n.b} GROUP BY {n.b_text}")


def _joined(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    v = rng.choice(d.b.values)
    return (f"List the distinct names of the {d.a.noun} who {d.verb} {d.b.noun} in the {d.b.text_word} {v}.",
            f"SELECT DISTINCT {n.a}.{n.a_name} FROM {n.event} JOIN {n.a} ON {n.event}.{n.a_fk} = {n.a}.id "
            f"JOIN {n.b} ON {n.event}.{n.b_fk} = {n.b}.id WHERE {n.b}.{n.b_text} = '{v}'")


def _total_in_year(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    y = rng.randint(2018, 2024)
    return (f"What is the total {d.amount_word} over all {d.event_noun} in {y}?",
            f"SELECT SUM({n.amount}) FROM {n.event} WHERE {n.year} = {y}")


def _top(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    k = rng.randint(2, 4)
    return (f"Which {k} {d.a.noun} have the most {d.event_noun}? Give each name and its number of {d.event_noun}, "
            f"most first (ties by name).",
            f"SELECT {n.a}.{n.a_name}, COUNT(*) AS c FROM {n.event} JOIN {n.a} ON {n.event}.{n.a_fk} = {n.a}.id "
            f"GROUP BY {n.a}.id ORDER BY c DESC, {n.a}.{n.a_name} LIMIT {k}")


def _above_average(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    return (f"List the names of the {d.b.noun} whose {d.b.number_word} is above the average {d.b.number_word} of "
            f"all {d.b.noun}.",
            f"SELECT {n.b_name} FROM {n.b} WHERE {n.b_number} > (SELECT AVG({n.b_number}) FROM {n.b})")


def _never(db: Database, rng: random.Random) -> Question:
    d, n = db.domain, db.names
    return (f"How many {d.a.noun} have no {d.event_noun} at all?",
            f"SELECT COUNT(*) FROM {n.a} WHERE id NOT IN (SELECT {n.a_fk} FROM {n.event})")


TEMPLATES: dict[str, tuple[str, Callable[[Database, random.Random], Question]]] = {
    "count_above": ("easy", _count_above), "names_in": ("easy", _names_in),
    "average": ("medium", _average), "per_group": ("medium", _per_group), "joined": ("medium", _joined),
    "total_in_year": ("medium", _total_in_year),
    "top": ("hard", _top), "above_average": ("hard", _above_average), "never": ("hard", _never),
}


def make_tasks(n: int, seed: int, split: str) -> list[Task]:
    """`n` tasks of `split`, each on a database of its own seed; the same for the same arguments."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    rng = random.Random(f"sql/{split}/{seed}")
    domains = OUT_DOMAINS if split == "heldout_out" else TRAIN_DOMAINS
    seeds = DATABASE_SEEDS[split]
    tasks = []
    for i in range(n):
        db = database(rng.choice(domains), seeds[rng.randrange(len(seeds))])
        name = rng.choice(sorted(TEMPLATES))
        difficulty, make = TEMPLATES[name]
        question, gold = make(db, rng)
        tasks.append(Task(id=f"sql-{split}-{seed}-{i}", prompt=f"Database {db.db_id}: {question}", answer=gold,
                          meta={"schema_sql": db.schema_sql, "db_id": db.db_id, "template": name,
                                "difficulty": difficulty, "split": split}))
    return tasks


def rows(schema_sql: str, query: str) -> list[tuple]:
    """The rows a query gives on a database built from its statements (for tests and demonstrations)."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(schema_sql)
        return [tuple(r) for r in db.execute(query).fetchall()]
    finally:
        db.close()
