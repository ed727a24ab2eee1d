"""SQLite databases for the SQL agent: six domains, each two entity tables and an event table that
joins them by foreign keys, with a few hundred seeded rows.

A database is its domain and a seed. The seed picks the schema's surface — table and column names
from synonyms (`customers` or `clients`, `city` or `town`), the foreign keys' naming, distractor
columns — and the rows, so one domain yields many distinct schemas and the words of a question
("customers") need not be a table's name (`clients`): the agent reads the schema first.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FIRST = ["Ada", "Ben", "Cleo", "Dev", "Ema", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kira", "Liam", "Mona", "Nico",
         "Omar", "Pia", "Quin", "Rosa", "Sami", "Tess", "Uma", "Vik", "Wren", "Xena", "Yuri", "Zoe"]
LAST = ["Abbott", "Brook", "Chen", "Diaz", "Evans", "Fox", "Grant", "Hale", "Ito", "Jones", "Khan", "Lopez",
        "Moss", "Nash", "Ortiz", "Park", "Quinn", "Reyes", "Stone", "Tran", "Vega", "Wells", "Young", "Zhou"]
CITIES = ["Avalon", "Brixton", "Cedar Falls", "Dunmore", "Elmwood", "Fairport", "Glenrock", "Harbor City"]


@dataclass(frozen=True)
class Entity:
    """An entity table: `noun` names it in questions; `text` a category column, `number` a numeric one."""

    noun: str  # plural, as a question says it ("customers")
    singular: str
    tables: tuple[str, ...]  # table-name synonyms
    text: tuple[str, ...]  # column-name synonyms of the category column
    text_word: str  # the category as a question says it ("city")
    values: tuple[str, ...]  # its values
    number: tuple[str, ...]
    number_word: str
    number_range: tuple[int, int]
    names: str  # "person" names, or a list of item words joined by "|"


@dataclass(frozen=True)
class Domain:
    name: str
    a: Entity  # the actor (customers)
    b: Entity  # what it acts on (products)
    event: tuple[str, ...]  # event-table synonyms (orders)
    event_noun: str
    verb: str  # "ordered": "customers who ordered a product ..."
    amount: tuple[str, ...]  # the event's numeric column
    amount_word: str


def _person(noun, singular, tables, text=("city", "town", "home_city"), number=("age", "years"), word="age",
            rng=(18, 80)) -> Entity:
    return Entity(noun, singular, tables, text, "city", tuple(CITIES), number, word, rng, "person")


DOMAINS = {
    "shop": Domain("shop", _person("customers", "customer", ("customers", "clients", "buyers")),
                   Entity("products", "product", ("products", "items", "goods"), ("category", "kind", "section"),
                          "category", ("toys", "books", "garden", "kitchen", "sports"), ("price", "unit_price"),
                          "price", (2, 400), "lamp|kettle|puzzle|novel|rake|ball|mug|kite|atlas|hose|pan|racket"),
                   ("orders", "purchases", "sales"), "orders", "ordered", ("quantity", "qty", "units"), "quantity"),
    "library": Domain("library", _person("members", "member", ("members", "patrons", "readers")),
                      Entity("books", "book", ("books", "titles", "volumes"), ("genre", "subject", "shelf"), "genre",
                             ("mystery", "history", "poetry", "science", "travel"), ("pages", "page_count"), "page count",
                             (80, 900), "Dawn|Echoes|Harbor|Ember|Atlas|Rivers|Signals|Orchard|Lanterns|Tides"),
                      ("loans", "borrowings", "checkouts"), "loans", "borrowed", ("days", "loan_days", "duration"),
                      "number of days"),
    "school": Domain("school", _person("students", "student", ("students", "pupils", "learners"), number=("age",),
                                       rng=(11, 19)),
                     Entity("courses", "course", ("courses", "classes", "subjects"), ("department", "dept", "faculty"),
                            "department", ("math", "art", "biology", "music", "languages"), ("credits", "credit_hours"),
                            "credits", (1, 8), "Algebra|Drawing|Cells|Choir|Spanish|Geometry|Painting|Botany|Jazz"),
                     ("enrollments", "registrations", "signups"), "enrollments", "enrolled in",
                     ("score", "grade", "mark"), "score"),
    "clinic": Domain("clinic", _person("patients", "patient", ("patients", "clients", "cared_for")),
                     Entity("doctors", "doctor", ("doctors", "physicians", "staff"), ("specialty", "field", "ward"),
                            "specialty", ("cardiology", "pediatrics", "surgery", "dermatology", "oncology"),
                            ("experience", "years_practice"), "years of experience", (1, 40), "person"),
                     ("visits", "appointments", "consultations"), "visits", "visited", ("fee", "cost", "charge"), "fee"),
    "travel": Domain("travel", _person("passengers", "passenger", ("passengers", "travelers", "flyers")),
                     Entity("flights", "flight", ("flights", "routes", "services"), ("destination", "dest", "arrival_city"),
                            "destination", ("Lisbon", "Oslo", "Cairo", "Lima", "Seoul"), ("distance", "distance_km"),
                            "distance", (300, 9000), "FL101|FL202|FL303|FL404|FL505|FL606|FL707|FL808|FL909"),
                     ("bookings", "reservations", "tickets"), "bookings", "booked", ("seats", "seat_count"), "seats"),
    "league": Domain("league", _person("players", "player", ("players", "athletes", "members"), number=("age",),
                                       rng=(17, 38)),
                     Entity("matches", "match", ("matches", "games", "fixtures"), ("venue", "stadium", "ground"), "venue",
                            ("North Park", "Riverside", "Old Mill", "Hilltop", "Bay Arena"), ("attendance", "crowd"),
                            "attendance", (500, 40000), "Cup|Derby|Final|Opener|Classic|Shield|Trophy|Showdown"),
                     ("appearances", "lineups", "selections"), "appearances", "played in", ("goals", "goals_scored"),
                     "goals"),
}


@dataclass(frozen=True)
class Names:
    """A database's surface: the actual table and column names its seed picked."""

    a: str
    b: str
    event: str
    a_name: str
    a_text: str
    a_number: str
    b_name: str
    b_text: str
    b_number: str
    a_fk: str
    b_fk: str
    amount: str
    year: str
    extra_a: tuple[str, ...]


@dataclass(frozen=True)
class Database:
    domain: Domain
    seed: int
    names: Names
    schema_sql: str  # CREATE TABLE and INSERT statements

    @property
    def db_id(self) -> str:
        """The name a question gives the database: its domain and seed, nothing of its schema."""
        return f"{self.domain.name}_{self.seed}"


def database(domain: str, seed: int) -> Database:
    """The database `seed` makes of `domain`: its names and rows, the same on every machine."""
    d, rng = DOMAINS[domain], random.Random(f"{domain}/{seed}")
    names = _names(d, rng)
    return Database(d, seed, names, _schema(d, names) + _rows(d, names, rng))


def _names(d: Domain, rng: random.Random) -> Names:
    a, b = rng.choice(d.a.tables), rng.choice([t for t in d.b.tables if t not in d.a.tables])
    event = rng.choice(d.event)
    fk = rng.choice(["{s}_id", "{s}_ref", "{s}_no"])
    a_single, b_single = d.a.singular, d.b.singular
    extra = tuple(rng.sample(["email", "phone", "joined_on", "notes", "status"], rng.randint(0, 2)))
    return Names(a, b, event, rng.choice(["name", "full_name"]), rng.choice(d.a.text), rng.choice(d.a.number),
                 rng.choice(["name", "title", "label"]), rng.choice(d.b.text), rng.choice(d.b.number),
                 fk.format(s=a_single), fk.format(s=b_single), rng.choice(d.amount), rng.choice(["year", "yr"]), extra)


def _schema(d: Domain, n: Names) -> str:
    extra = "".join(f", {c} TEXT" for c in n.extra_a)
    return (f"CREATE TABLE {n.a} (id INTEGER PRIMARY KEY, {n.a_name} TEXT NOT NULL, {n.a_text} TEXT, "
            f"{n.a_number} INTEGER{extra});\n"
            f"CREATE TABLE {n.b} (id INTEGER PRIMARY KEY, {n.b_name} TEXT NOT NULL, {n.b_text} TEXT, "
            f"{n.b_number} INTEGER);\n"
            f"CREATE TABLE {n.event} (id INTEGER PRIMARY KEY, {n.a_fk} INTEGER NOT NULL REFERENCES {n.a}(id), "
            f"{n.b_fk} INTEGER NOT NULL REFERENCES {n.b}(id), {n.amount} INTEGER, {n.year} INTEGER);\n")


def _rows(d: Domain, n: Names, rng: random.Random) -> str:
    def q(v) -> str:
        return "'" + str(v).replace("'", "''") + "'" if isinstance(v, str) else str(v)

    def insert(table: str, rows: list[tuple]) -> str:
        return "".join(f"INSERT INTO {table} VALUES ({', '.join(q(v) for v in r)});\n" for r in rows)

    n_a, n_b, n_e = rng.randint(60, 120), rng.randint(24, 48), rng.randint(180, 320)
    a_rows = [(i + 1, _name(d.a.names, rng, i), rng.choice(d.a.values), rng.randint(*d.a.number_range),
               *[f"{c}-{i + 1}" for c in n.extra_a]) for i in range(n_a)]
    b_rows = [(i + 1, _name(d.b.names, rng, i), rng.choice(d.b.values), rng.randint(*d.b.number_range))
              for i in range(n_b)]
    e_rows = [(i + 1, rng.randint(1, n_a), rng.randint(1, n_b), rng.randint(1, 20), rng.randint(2018, 2024))
              for i in range(n_e)]
    return insert(n.a, a_rows) + insert(n.b, b_rows) + insert(n.event, e_rows)


def _name(kind: str, rng: random.Random, i: int) -> str:
    """A person's name, or an item word with a number; `i` keeps names unique within a table."""
    if kind == "person":
        return f"{FIRST[i % len(FIRST)]} {LAST[(i // len(FIRST) + rng.randrange(len(LAST))) % len(LAST)]} {i + 1}"
    words = kind.split("|")
    return f"{rng.choice(words)} {i + 1}"
