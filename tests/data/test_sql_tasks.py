"""The SQL agent's databases and questions: seeded, split by database, many schemas, and every gold
query runs."""

from __future__ import annotations

from agentic_rl.data import sql_tasks
from agentic_rl.data.sql_schemas import DOMAINS, database


def test_tasks_are_seeded_and_cover_every_template_and_difficulty():
    a, b = sql_tasks.make_tasks(60, 3, "train"), sql_tasks.make_tasks(60, 3, "train")
    assert a == b and a != sql_tasks.make_tasks(60, 4, "train")
    assert {t.meta["template"] for t in a} == set(sql_tasks.TEMPLATES)
    assert {t.meta["difficulty"] for t in a} == {"easy", "medium", "hard"}


def test_held_out_splits_never_share_a_database_with_training():
    dbs = {s: {t.meta["db_id"] for t in sql_tasks.make_tasks(150, 0, s)} for s in sql_tasks.SPLITS}
    assert not dbs["train"] & dbs["heldout_in"] and not dbs["train"] & dbs["heldout_out"]
    assert {d.split("_")[0] for d in dbs["heldout_out"]} == set(sql_tasks.OUT_DOMAINS)  # domains never trained on
    assert {d.split("_")[0] for d in dbs["train"]} == set(sql_tasks.TRAIN_DOMAINS)


def test_one_domain_gives_many_schemas_with_foreign_keys_and_hundreds_of_rows():
    dbs = [database("shop", seed) for seed in range(40)]
    schemas = {db.schema_sql.split("INSERT", 1)[0] for db in dbs}
    assert len(schemas) >= 20  # 40 seeds, table and column names drawn from synonyms
    db = dbs[0]
    assert db.schema_sql.count("REFERENCES") == 2 and db.schema_sql.count("CREATE TABLE") == 3
    counts = [len(sql_tasks.rows(db.schema_sql, f"SELECT * FROM {t}")) for t in (db.names.a, db.names.b, db.names.event)]
    assert counts[0] >= 60 and counts[1] >= 24 and counts[2] >= 180


def test_every_gold_query_runs_and_the_question_speaks_the_domains_words():
    """A question names the domain's nouns ("customers"), never a synonym the schema drew in their
    place (`clients`): the agent finds the table by reading the schema."""
    for t in sql_tasks.make_tasks(45, 1, "train"):
        sql_tasks.rows(t.meta["schema_sql"], t.answer)  # raises on a broken gold query
        d = DOMAINS[t.meta["db_id"].split("_")[0]]
        words = {d.a.noun, d.b.noun, d.event_noun}
        tables = [line.split()[2] for line in t.meta["schema_sql"].splitlines() if line.startswith("CREATE TABLE")]
        question = t.prompt.split(": ", 1)[1]
        assert not [name for name in tables if name not in words and f" {name} " in f" {question} "], question
