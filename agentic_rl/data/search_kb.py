"""A generated encyclopedia of a fictional world: the knowledge base the Search-R1 questions ask about.

Every name is coined from syllables (each name word is used once, except family surnames), so no
model can know an answer without searching: what the agent learns is to search, read and chain.
Each entity is one short passage stating its facts plus distractor facts about other entities (a
person's later home city beside the birthplace, a company's chief executive beside its founder, a
film's star beside its director, a country's largest city beside its capital), so a reader that
grabs the first name it sees is often wrong.

Every entity carries a `group`, "train" or "heldout", and the facts a question chains through
(founder, book, film) only link entities of the same group, so questions about heldout entities
need no passage a training question needs. One world per seed, deterministic.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agentic_rl.tools.search import Passage

_SYLLABLES = (
    "ka ri lo men dar vel to sa nir bel dor fen gal hu is jor lin mo nes or pra ru sel tan ul vor wen "
    "zel ba ce di fo ga ke mu na pe qui ro su te vi ash bri cor del eth fal gor hal "
    "ith kel lun mar nor osk pel quen rav sor thal und val wyn yor zan"
).split()
_JOBS = ("painter", "engineer", "botanist", "sailor", "architect", "physician", "poet", "merchant",
         "astronomer", "composer", "historian", "cartographer")
_INDUSTRIES = ("shipbuilding", "textiles", "glassware", "printing", "railways", "mining", "tea", "clocks")
_GENRES = ("novel", "collection of poems", "travel memoir", "historical novel", "play", "adventure novel")
_COMPANY_SUFFIXES = ("Industries", "Works", "Holdings", "Trading", "Foundry", "Press", "Motors", "Mills")
_COUNTRY_FORMS = ("Republic", "Kingdom", "Federation", "Commonwealth", "Principality")
_BOOK_TITLES = ("The {w}", "{w}", "Songs of {w}", "The {w} Letters", "A Winter in {w}", "Beyond {w}")
_FILM_TITLES = ("{w}", "The {w} Affair", "Return to {w}", "{w} Rising", "Night over {w}")
_HELDOUT_SHARE = 0.2  # fraction of each kind that only heldout_in questions ask about
GROUPS = ("train", "heldout")
# entities per kind, one passage each (1,384 in all)
SIZES = {"country": 24, "city": 160, "person": 640, "company": 160, "book": 160, "film": 120,
         "river": 60, "mountain": 60}


@dataclass(frozen=True)
class Entity:
    kind: str
    name: str
    group: str  # "train" | "heldout"
    facts: Mapping[str, str]
    aliases: tuple[str, ...] = ()  # other names that count as a correct answer

    @property
    def passage_id(self) -> str:
        return "kb/" + re.sub(r"\W+", "-", self.name.lower()).strip("-")


@dataclass(frozen=True)
class World:
    seed: int
    entities: Mapping[str, Entity]  # name -> entity, in generation order
    texts: Mapping[str, str]  # name -> passage text

    def of(self, kind: str, group: str | None = None) -> list[Entity]:
        return [e for e in self.entities.values() if e.kind == kind and group in (None, e.group)]

    def passages(self) -> list[Passage]:
        return [Passage(e.passage_id, e.name, self.texts[e.name]) for e in self.entities.values()]


@functools.lru_cache(maxsize=4)
def world(seed: int = 0) -> World:
    b = _Builder(random.Random(f"search_kb/{seed}"))
    b.places()
    b.people()
    b.works()
    b.landmarks()
    entities = {n: Entity(kind, n, group, MappingProxyType(facts), aliases)
                for n, (kind, group, facts, aliases) in b.ents.items()}
    texts = {n: _passage_text(e, random.Random(f"search_kb/{seed}/{n}")) for n, e in entities.items()}
    return World(seed, MappingProxyType(entities), MappingProxyType(texts))


class _Builder:
    """Draws the world kind by kind; `ents` maps name -> (kind, group, facts, aliases)."""

    def __init__(self, rng: random.Random):
        self.rng, self.used, self.ents = rng, set(), {}

    def word(self) -> str:
        while True:
            w = "".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.choice((2, 2, 3)))).capitalize()
            if w not in self.used:
                self.used.add(w)
                return w

    def add(self, kind: str, name: str, facts: dict, group: str | None = None, aliases=()) -> str:
        group = group or ("heldout" if self.rng.random() < _HELDOUT_SHARE else "train")
        self.ents[name] = (kind, group, facts, tuple(aliases))
        return name

    def names(self, kind: str, group: str | None = None) -> list[str]:
        return [n for n, (k, g, _, _) in self.ents.items() if k == kind and group in (None, g)]

    def facts(self, name: str) -> dict:
        return self.ents[name][2]

    def places(self) -> None:
        """Countries, each with a capital, a different largest city and at least four cities."""
        countries = [self.word() for _ in range(SIZES["country"])]
        for c in countries:
            self.add("country", c, {}, aliases=[f"{self.rng.choice(_COUNTRY_FORMS)} of {c}"])
        for i in range(SIZES["city"]):
            country = countries[i % len(countries)] if i < 4 * len(countries) else self.rng.choice(countries)
            self.add("city", self.word(), {"country": country, "year": str(self.rng.randint(900, 1850)),
                                           "industry": self.rng.choice(_INDUSTRIES)})
        for c in countries:
            cities = [n for n in self.names("city") if self.facts(n)["country"] == c]
            others = [o for o in countries if o != c]
            self.facts(c).update(capital=cities[0], largest=cities[1], neighbour=self.rng.choice(others))
        for city in self.names("city"):
            twin = self.rng.choice([n for n in self.names("city") if n != city])
            self.facts(city).update(twin=twin, twin_country=self.facts(twin)["country"])

    def people(self) -> None:
        """People; some share a surname with a recent sibling (a retrieval distractor)."""
        cities, recent = self.names("city"), {g: [] for g in GROUPS}
        for _ in range(SIZES["person"]):
            group = "heldout" if self.rng.random() < _HELDOUT_SHARE else "train"
            kin = recent[group][-40:]
            sibling = self.rng.choice(kin) if kin and self.rng.random() < 0.15 else None
            surname = sibling.split()[1] if sibling else self.word()
            born, home = self.rng.sample(cities, 2)
            facts = {"born": born, "born_country": self.facts(born)["country"], "home": home,
                     "year": str(self.rng.randint(1820, 1985)), "job": self.rng.choice(_JOBS)}
            if sibling:
                facts["sibling"] = sibling
            recent[group].append(self.add("person", f"{self.word()} {surname}", facts, group))

    def works(self) -> None:
        """Companies, books and films; founders, authors and adaptations stay inside one group."""
        rng, cities = self.rng, self.names("city")
        people = {g: self.names("person", g) for g in GROUPS}
        for _ in range(SIZES["company"]):
            group = "heldout" if rng.random() < _HELDOUT_SHARE else "train"
            founder, ceo = rng.sample(people[group], 2)
            self.add("company", f"{self.word()} {rng.choice(_COMPANY_SUFFIXES)}", {
                "founder": founder, "ceo": ceo, "year": _later(rng, self.facts(founder)["year"], 22, 60),
                "hq": rng.choice(cities), "industry": rng.choice(_INDUSTRIES)}, group)
        for _ in range(SIZES["book"]):
            group = "heldout" if rng.random() < _HELDOUT_SHARE else "train"
            author = rng.choice(people[group])
            self.add("book", rng.choice(_BOOK_TITLES).format(w=self.word()), {
                "author": author, "year": _later(rng, self.facts(author)["year"], 20, 70),
                "genre": rng.choice(_GENRES), "setting": rng.choice(cities)}, group)
        for book in rng.sample(self.names("book"), SIZES["film"]):
            group = self.ents[book][1]
            director, star = rng.sample(people[group], 2)
            film = self.add("film", rng.choice(_FILM_TITLES).format(w=self.word()), {
                "book": book, "director": director, "star": star, "filmed": rng.choice(cities),
                "year": _later(rng, self.facts(book)["year"], 1, 40)}, group)
            self.facts(book)["film"] = film

    def landmarks(self) -> None:
        rng, countries, people = self.rng, self.names("country"), self.names("person")
        for _ in range(SIZES["river"]):
            country = rng.choice(countries)
            self.add("river", f"{self.word()} River", {
                "country": country, "length": str(rng.randint(40, 2400)), "through": self.facts(country)["largest"]})
        for _ in range(SIZES["mountain"]):
            self.add("mountain", f"Mount {self.word()}", {
                "country": rng.choice(countries), "height": str(rng.randint(900, 7900)),
                "climber": rng.choice(people), "climbed": str(rng.randint(1850, 1990))})


# Each kind's passage in two phrasings, so that no single sentence shape gives every answer away.
_FORMS = {
    "country": ("{name} (officially the {official}) is a country whose capital is {capital}. Its largest city "
                "is {largest}, and it shares a border with {neighbour}.",
                "{name} is a country; its capital city is {capital}. The {official} borders {neighbour}, and "
                "its largest city is {largest}."),
    "city": ("{name} is a city in the country of {country}, founded in {year} and known for its {industry}. It is twinned "
             "with {twin} in {twin_country}.",
             "Founded in {year}, {name} is a town in the country of {country}. Its {industry} trade links it "
             "with its twin town {twin}, {twin_country}."),
    "person": ("{name} was {a_job} born in {born}, {born_country}, in {year}. {first} later lived and worked "
               "in {home}.",
               "Born in {year} in {born} ({born_country}), {name} became {a_job} and settled in {home}."),
    "company": ("{name} is {a_industry} company founded in {year} by {founder}. Its headquarters are in {hq}, "
                "and its chief executive is {ceo}.",
                "{founder} founded {name} in {year}. The {industry} firm is run today by {ceo} from its "
                "headquarters in {hq}."),
    "book": ("{name} is {a_genre} by {author}, first published in {year} and set in {setting}.",
             "Written by {author} and published in {year}, {name} is {a_genre} set in {setting}."),
    "film": ("{name} is a {year} film directed by {director} and based on the book {book}. It stars {star} "
             "and was filmed in {filmed}.",
             "Directed by {director}, the {year} film {name} adapts the book {book}. {star} plays the lead; "
             "it was shot in {filmed}."),
    "river": ("The {name} is a river in {country}, {length} km long. It flows through {through}.",
              "The {name} runs {length} km through {country}, passing the city of {through}."),
    "mountain": ("{name} is a mountain in {country}, {height} metres high. It was first climbed by {climber} "
                 "in {climbed}.",
                 "Rising {height} metres, {name} stands in {country}; {climber} first reached its summit in "
                 "{climbed}."),
}


def _passage_text(e: Entity, rng: random.Random) -> str:
    fields = {**e.facts, "name": e.name, "first": e.name.split()[0], "official": (e.aliases or ("",))[0]}
    fields.update({f"a_{k}": _a(e.facts[k]) for k in ("job", "genre", "industry") if k in e.facts})
    text = rng.choice(_FORMS[e.kind]).format(**fields)
    if "sibling" in e.facts:
        text += f" {fields['first']} was a sibling of {e.facts['sibling']}."
    if "film" in e.facts:
        text += f" It was adapted into the film {e.facts['film']}."
    return text


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _later(rng: random.Random, year: str, low: int, high: int) -> str:
    """A year `low` to `high` years after `year`; `high` shrinks so that dates stay near the present."""
    return str(int(year) + rng.randint(low, max(low, min(high, 2024 - int(year)))))
