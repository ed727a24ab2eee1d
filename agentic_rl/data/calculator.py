"""Calculator tasks: bare arithmetic and word problems a small model must turn into calculator calls.

Templates are split once, at the template level: TRAIN_TEMPLATES are trained on (and re-drawn with new
numbers for the in-template eval), HELDOUT_TEMPLATES only ever appear in the out-of-template eval. The
held-out templates use other scenarios and other sentence patterns, so they measure the skill "turn
words into an expression, call the tool, answer" rather than recall of a trained sentence. The split is
fixed up front; changing it after looking at results would turn the held-out set into a tuned one.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator

from agentic_rl.data.calculator_broad import broaden
from agentic_rl.data.calculator_fresh import FRESH_TEMPLATES
from agentic_rl.data.calculator_templates import (  # noqa: F401  (Template, shared_digits: public here too)
    NAMES,
    Template,
    between,
    product,
    shared_digits,
    split_total,
)
from agentic_rl.tools.calculator import calculator, safe_eval
from agentic_rl.types import Task

DIFFICULTIES = (1, 2, 3)
DIFFICULTY_WEIGHTS = (0.3, 0.4, 0.3)  # default mix when no difficulty is given
# rl_extra: RL prompts only; train_shared: the training templates with operands that share digits;
# heldout_fresh: the second out-of-template held-out set (`calculator_fresh.py`), evaluated only when asked;
# train_broad: the training templates in more surface forms (`calculator_broad.py`)
SPLITS = ("train", "heldout_in", "heldout_out", "rl_extra", "train_shared", "heldout_fresh", "train_broad")
TRAIN_SEED = 0  # the train stream heldout_in is kept disjoint from
EXCLUDED_TRAIN_TASKS = 20_000
# train_shared never draws one of the first EXCLUDED_HELDOUT_TASKS heldout_in problems at the eval's
# default seed: its number pairs are few enough (222 km/h for 22 hours) that it otherwise would
EVAL_SEED = 12345
EXCLUDED_HELDOUT_TASKS = 2_000
SHARED_DIGITS_RATE = 0.5  # train_shared: the chance that a number slot is drawn from shared digits
# Families per block of ten tasks, shuffled within the block: exact proportions, yet no fixed order.
_FAMILY_BLOCKS = {
    "train": ("bare",) * 3 + ("one_step",) * 4 + ("two_step",) * 3,
    "heldout_out": ("one_step",) * 5 + ("two_step",) * 5,
    "heldout_fresh": ("one_step",) * 5 + ("two_step",) * 5,
    "rl_extra": ("one_step",) * 5 + ("two_step",) * 5,
}


def _bare_expression(values: dict, rng: random.Random, difficulty: int) -> str:
    """2-3 operands with + - *; multiplication is weighted up because that is where small models fail."""
    n_operands = 2 if difficulty == 1 else 3
    low, high = {1: (12, 99), 2: (12, 99), 3: (101, 999)}[difficulty]
    while True:  # resample the rare negative result: answers stay non-negative everywhere
        parts = [str(rng.randint(low, high))]
        for _ in range(n_operands - 1):
            parts += [rng.choice(("*", "*", "+", "-")), str(rng.randint(low, high))]
        expression = " ".join(parts)
        if safe_eval(expression) >= 0:
            return expression


def _shown(values: dict, rng: random.Random, difficulty: int) -> str:
    # Some prompts use the typographic sign; the model must still send "*" (or rely on normalization).
    return values["expr"].replace("*", "×") if rng.random() < 0.25 else values["expr"]


# fmt: off
_ITEMS = ("notebook", "lamp", "mug", "backpack", "poster")
_THINGS = ("stickers", "marbles", "cards", "stamps")

TRAIN_TEMPLATES: tuple[Template, ...] = (
    Template("bare_arith", "bare",
        ("What is {shown}?", "Compute {shown}.", "Calculate {shown}.", "What is the value of {shown}?"),
        {"expr": _bare_expression, "shown": _shown}, ("{expr}",), "{expr}",
        (("I need to compute {step}.", "Let me work out {step}.", "I must calculate {step}."),)),
    Template("shop_total", "one_step",
        ("A {item} costs {price} dollars. How much do {qty} {item}s cost in dollars?",
         "{name} buys {qty} {item}s at {price} dollars each. How many dollars does {name} pay?",
         "Each {item} is sold for {price} dollars. What is the total cost of {qty} {item}s?"),
        {"name": NAMES, "item": _ITEMS, "price": "value", "qty": "count"},
        ("{price} * {qty}",), "{price} * {qty}", ("The total cost is {step} dollars.",)),
    Template("share_equal", "one_step",
        ("{name} has {total} {thing} and shares them equally among {people} friends. "
         "How many {thing} does each friend get?",
         "{total} {thing} are split equally between {people} children. "
         "How many {thing} does each child receive?"),
        {"name": NAMES, "thing": _THINGS, "people": "count", "each": "value",
         "total": product("people", "each")},
        ("{total} / {people}",), "{total} / {people}", ("Each one gets {step} {thing}.",)),
    Template("tank_remaining", "one_step",
        ("A water tank holds {start} liters. {used} liters are used for the garden. "
         "How many liters are left in the tank?",
         "There were {start} liters of water in a tank. "
         "After {used} liters were used, how many liters remain?",
         "{name} fills a tank with {start} liters of water and uses {used} liters. "
         "How many liters are still in it?"),
        {"name": NAMES, "start": "big", "used": between("start")},
        ("{start} - {used}",), "{start} - {used}", ("The tank has {step} liters left.",)),
    Template("travel_distance", "one_step",
        ("A train travels at {speed} kilometers per hour for {hours} hours. "
         "How many kilometers does it travel?",
         "A car drives for {hours} hours at {speed} km per hour. What distance does it cover in kilometers?",
         "Moving at a steady {speed} km/h, how far does a ship go in {hours} hours, in kilometers?"),
        {"speed": "value", "hours": "count"},
        ("{speed} * {hours}",), "{speed} * {hours}", ("The distance is {step} kilometers.",)),
    Template("area_rect", "one_step",
        ("A rectangular garden is {length} meters long and {width} meters wide. "
         "What is its area in square meters?",
         "What is the area, in square meters, of a room that measures {length} m by {width} m?"),
        {"length": "value", "width": "value"},
        ("{length} * {width}",), "{length} * {width}", ("The area is {step} square meters.",)),
    Template("library_total", "one_step",
        ("A library has {a} fiction books and {b} non-fiction books. How many books does it have in total?",
         "{name} counted {a} red beads and {b} blue beads. How many beads did {name} count altogether?"),
        {"name": NAMES, "a": "big", "b": "big"},
        ("{a} + {b}",), "{a} + {b}", ("The total is {step}.",)),
    Template("bake_sell", "two_step",
        ("A baker makes {trays} trays of {per} cookies and sells {sold} of them. How many cookies are left?",
         "A bakery bakes {per} cookies on each of {trays} trays. {sold} cookies are sold. "
         "How many cookies remain?"),
        {"trays": "count", "per": "value", "total": product("trays", "per"), "sold": between("total")},
        ("{trays} * {per}", "{prev} - {sold}"), "{trays} * {per} - {sold}",
        ("The baker makes {step} cookies.", "After selling {sold}, {step} cookies are left.")),
    Template("buy_change", "two_step",
        ("{name} buys {qty} books at {price} dollars each and pays with {paid} dollars. "
         "How much change does {name} get?",
         "{name} pays {paid} dollars for {qty} books that cost {price} dollars each. "
         "How many dollars of change does {name} receive?"),
        {"name": NAMES, "qty": "count", "price": "value",
         "paid": lambda v, rng, d: (v["qty"] * v["price"] // 100 + rng.randint(1, 5)) * 100},
        ("{qty} * {price}", "{paid} - {prev}"), "{paid} - {qty} * {price}",
        ("The books cost {step} dollars.", "The change is {step} dollars.")),
    Template("apple_share", "two_step",
        ("A farmer packs {boxes} boxes with {per} apples each. The apples are shared equally among "
         "{stores} stores. How many apples does each store get?",
         "{boxes} bags hold {per} apples each. All the apples are divided equally between {stores} shops. "
         "How many apples does each shop receive?"),
        {"stores": "count", "per": "value", "boxes": lambda v, rng, d: v["stores"] * rng.randint(2, 6)},
        ("{boxes} * {per}", "{prev} / {stores}"), "{boxes} * {per} / {stores}",
        ("There are {step} apples in total.", "Each store gets {step} apples.")),
    Template("theater_seats", "two_step",
        ("A theater has {rows} rows of {seats} seats and {extra} extra chairs. "
         "How many people can sit in the theater?",
         "In a hall there are {rows} rows with {seats} seats in each row, plus {extra} folding chairs. "
         "How many seats are there in all?"),
        {"rows": "count", "seats": "value", "extra": "value"},
        ("{rows} * {seats}", "{prev} + {extra}"), "{rows} * {seats} + {extra}",
        ("The rows hold {step} people.", "With the extra chairs there are {step} seats.")),
    Template("harvest_baskets", "two_step",
        ("Two farms pick {a} and {b} oranges. The oranges are packed equally into {baskets} baskets. "
         "How many oranges are in each basket?",
         "{name} picks {a} oranges in the morning and {b} in the afternoon, then packs them equally into "
         "{baskets} baskets. How many oranges go in each basket?"),
        {"name": NAMES, "baskets": "count", "per": "value", "total": product("baskets", "per"),
         **split_total("total")},
        ("{a} + {b}", "{prev} / {baskets}"), "({a} + {b}) / {baskets}",
        ("Together there are {step} oranges.", "Each basket gets {step} oranges.")),
)

HELDOUT_TEMPLATES: tuple[Template, ...] = (
    Template("wage_hours", "one_step",
        ("If {name} earns {wage} dollars every hour, what does {name} earn for {hours} hours of work?",
         "What is {name}'s pay for {hours} hours of work at an hourly wage of {wage} dollars?"),
        {"name": NAMES, "wage": "value", "hours": "count"},
        ("{wage} * {hours}",), "{wage} * {hours}", ("The pay is {step} dollars.",)),
    Template("reading_plan", "one_step",
        ("{name} wants to read a {pages}-page book in {days} days, reading the same number of pages every "
         "day. How many pages is that per day?",
         "To finish {pages} pages in exactly {days} days at an even pace, "
         "how many pages must be read daily?"),
        {"name": NAMES, "days": "count", "per": "value", "pages": product("days", "per")},
        ("{pages} / {days}",), "{pages} / {days}", ("That is {step} pages per day.",)),
    Template("tower_diff", "one_step",
        ("Mount Alder rises {h1} meters and Mount Birch rises {h2} meters. "
         "By how many meters is Mount Alder higher?",
         "How much taller, in meters, is a {h1}-meter tower than a {h2}-meter tower?"),
        {"h1": "big", "h2": between("h1", 3)},
        ("{h1} - {h2}",), "{h1} - {h2}", ("The difference is {step} meters.",)),
    Template("box_volume", "one_step",
        ("Find the volume in cubic centimeters of a box that is {l} cm long, {w} cm wide and {h} cm high.",
         "A storage box has inner dimensions {l} cm by {w} cm by {h} cm. "
         "How many cubic centimeters does it hold?"),
        {"l": "value", "w": "count", "h": "count"},
        ("{l} * {w} * {h}",), "{l} * {w} * {h}", ("The volume is {step} cubic centimeters.",)),
    Template("bus_passengers", "one_step",
        ("There are {buses} buses, and every bus carries {per} passengers. "
         "Altogether, how many passengers are there?",
         "Each of {buses} buses has {per} passengers on board. Find the number of passengers in all."),
        {"buses": "count", "per": "value"},
        ("{buses} * {per}",), "{buses} * {per}", ("There are {step} passengers.",)),
    Template("fuel_left", "two_step",
        ("A truck burns {rate} liters of fuel per day. "
         "After {days} days, how much of its {tank}-liter supply remains?",
         "A generator starts with a {tank}-liter diesel supply, burning {rate} liters each day. "
         "What amount is left after {days} days, in liters?"),
        {"rate": "value", "days": "count",
         "tank": lambda v, rng, d: (v["rate"] * v["days"] // 100 + rng.randint(1, 5)) * 100},
        ("{rate} * {days}", "{tank} - {prev}"), "{tank} - {rate} * {days}",
        ("In total {step} liters are used.", "The supply left is {step} liters.")),
    Template("ticket_split", "two_step",
        ("Tickets are {price} dollars apiece. A group of {friends} friends buys {tickets} tickets and "
         "splits the bill evenly. What does each friend pay, in dollars?",),
        {"friends": "count", "price": "value", "tickets": lambda v, rng, d: v["friends"] * rng.randint(2, 5)},
        ("{tickets} * {price}", "{prev} / {friends}"), "{tickets} * {price} / {friends}",
        ("The bill is {step} dollars.", "Each friend pays {step} dollars.")),
    Template("crate_weight", "two_step",
        ("Find the total weight in kilograms of {n} crates weighing {w} kg each together with a "
         "{pallet} kg pallet.",
         "What do {n} crates of {w} kg each weigh, in kilograms, "
         "when loaded on a pallet that weighs {pallet} kg?"),
        {"n": "count", "w": "value", "pallet": "value"},
        ("{n} * {w}", "{prev} + {pallet}"), "{n} * {w} + {pallet}",
        ("The crates weigh {step} kg.", "With the pallet it is {step} kg.")),
    Template("savings_goal", "two_step",
        ("{name} wants {goal} dollars and already has {start}. Saving {per} dollars a week, "
         "how many weeks will it take?",
         "How many weeks of saving {per} dollars per week does {name} need to grow {start} dollars "
         "into {goal} dollars?"),
        {"name": NAMES, "per": "value", "weeks": "count", "start": "value",
         "goal": lambda v, rng, d: v["start"] + v["per"] * v["weeks"]},
        ("{goal} - {start}", "{prev} / {per}"), "({goal} - {start}) / {per}",
        ("{name} still needs {step} dollars.", "That takes {step} weeks.")),
    Template("team_balls", "two_step",
        ("A coach splits {players} players into teams of {size}, and every team needs {balls} balls. "
         "How many balls are needed in total?",),
        {"teams": "count", "size": lambda v, rng, d: rng.randint(3, 11), "players": product("teams", "size"),
         "balls": "count"},
        ("{players} / {size}", "{prev} * {balls}"), "{players} / {size} * {balls}",
        ("There are {step} teams.", "The teams need {step} balls.")),
)

# Prompts for RL only: RL needs a checkable answer, not a demonstration, so its prompt set can be wider
# than the SFT demonstrations (`rl.tasks.splits: [train, rl_extra]`). Other scenarios and sentence patterns
# again; none shares a wording skeleton with HELDOUT_TEMPLATES (tested), so the out-of-template eval
# stays unseen by every stage.
RL_TEMPLATES: tuple[Template, ...] = (
    Template("tulip_rows", "one_step",
        ("{name} plants {rows} rows of tulips with {per} tulips in every row. How many tulips is that?",
         "How many tulips grow in a flower bed made of {rows} rows holding {per} tulips apiece?"),
        {"name": NAMES, "rows": "count", "per": "value"},
        ("{rows} * {per}",), "{rows} * {per}", ("There are {step} tulips.",)),
    Template("pizza_slices", "one_step",
        ("At a party, {total} pizza slices go equally to {people} guests. How many slices per guest?",
         "{name} cuts {total} slices of pizza for {people} guests so everybody gets the same amount. "
         "How many slices does one guest get?"),
        {"name": NAMES, "people": "count", "per": "value", "total": product("people", "per")},
        ("{total} / {people}",), "{total} / {people}", ("Each guest gets {step} slices.",)),
    Template("kite_height", "one_step",
        ("A kite flying at {h1} meters sinks by {h2} meters. What is its height now, in meters?",
         "{name}'s drone hovers {h1} meters up, then descends {h2} meters. How high is it afterwards?"),
        {"name": NAMES, "h1": "big", "h2": between("h1", 3)},
        ("{h1} - {h2}",), "{h1} - {h2}", ("The height is {step} meters.",)),
    Template("stamp_gift", "one_step",
        ("{name} owns {a} stamps and receives {b} more as a gift. How many stamps does {name} own now?",
         "After a gift of {b} coins, how many coins does a collector who had {a} coins hold?"),
        {"name": NAMES, "a": "big", "b": "big"},
        ("{a} + {b}",), "{a} + {b}", ("Now there are {step}.",)),
    Template("rope_pieces", "one_step",
        ("A rope was cut into {pieces} pieces, each {length} centimeters long. "
         "What was the length of the rope in centimeters?",
         "{pieces} equal ribbons of {length} cm were cut from one roll. How many centimeters of ribbon was that?"),
        {"pieces": "count", "length": "value"},
        ("{pieces} * {length}",), "{pieces} * {length}", ("The rope was {step} centimeters.",)),
    Template("parking_free", "two_step",
        ("A parking garage has {levels} levels with {spots} spots on each level, and {taken} spots are taken. "
         "How many spots are free?",
         "On each of {levels} floors a car park offers {spots} spaces. If {taken} spaces are occupied, "
         "how many are empty?"),
        {"levels": "count", "spots": "value", "total": product("levels", "spots"), "taken": between("total")},
        ("{levels} * {spots}", "{prev} - {taken}"), "{levels} * {spots} - {taken}",
        ("The garage has {step} spots.", "{step} spots are free.")),
    Template("pencil_boxes", "two_step",
        ("A teacher opens {boxes} boxes of {per} pencils and hands them out equally to {kids} students. "
         "How many pencils does each student get?",
         "{name} has {boxes} packs with {per} pencils in each and gives them to {kids} classmates in equal "
         "shares. What is one classmate's share?"),
        {"name": NAMES, "kids": "count", "per": "value", "boxes": lambda v, rng, d: v["kids"] * rng.randint(2, 6)},
        ("{boxes} * {per}", "{prev} / {kids}"), "{boxes} * {per} / {kids}",
        ("There are {step} pencils.", "Each student gets {step} pencils.")),
    Template("orchard_trees", "two_step",
        ("An orchard has {rows} rows of {trees} trees, plus {extra} trees near the gate. "
         "How many trees does the orchard have?",
         "How many trees are there if {rows} rows each hold {trees} trees and {extra} more stand alone?"),
        {"rows": "count", "trees": "value", "extra": "value"},
        ("{rows} * {trees}", "{prev} + {extra}"), "{rows} * {trees} + {extra}",
        ("The rows hold {step} trees.", "Altogether there are {step} trees.")),
    Template("jar_savings", "two_step",
        ("{name} had {a} dollars, earned {b} dollars more, and put all of it equally into {jars} jars. "
         "How many dollars are in each jar?",
         "Two friends bring {a} and {b} marbles and sort all of them evenly into {jars} jars. "
         "How many marbles end up in one jar?"),
        {"name": NAMES, "jars": "count", "per": "value", "total": product("jars", "per"),
         **split_total("total")},
        ("{a} + {b}", "{prev} / {jars}"), "({a} + {b}) / {jars}",
        ("Together that is {step}.", "Each jar holds {step}.")),
    Template("jug_pour", "two_step",
        ("A jug holds {cap} milliliters of juice. {name} pours {cups} cups of {per} milliliters. "
         "How many milliliters stay in the jug?",
         "{name} fills {cups} glasses with {per} ml each from a {cap} ml jug. How much juice is left in ml?"),
        {"name": NAMES, "cups": "count", "per": "value",
         "cap": lambda v, rng, d: (v["cups"] * v["per"] // 100 + rng.randint(1, 5)) * 100},
        ("{cups} * {per}", "{cap} - {prev}"), "{cap} - {cups} * {per}",
        ("{name} pours {step} milliliters.", "The jug still has {step} milliliters.")),
)

# fmt: on
TEMPLATES_BY_ID: dict[str, Template] = {t.id: t for t in TRAIN_TEMPLATES + HELDOUT_TEMPLATES + RL_TEMPLATES
                                        + FRESH_TEMPLATES}


def _draws(split: str, seed: int, difficulty: int | None) -> Iterator[tuple[Template, dict, str, int]]:
    """Endless (template, values, prompt, difficulty) stream for a split; a pure function of its arguments."""
    rng = random.Random(f"calc:{split}:{seed}")  # str seeds are stable across processes and hash seeds
    pool = {"heldout_out": HELDOUT_TEMPLATES, "rl_extra": RL_TEMPLATES,
            "heldout_fresh": FRESH_TEMPLATES}.get(split, TRAIN_TEMPLATES)
    by_family = {f: [t for t in pool if t.family == f] for f in ("bare", "one_step", "two_step")}
    block: list[str] = []
    while True:
        if not block:
            block = list(_FAMILY_BLOCKS.get(split, _FAMILY_BLOCKS["train"]))
            rng.shuffle(block)
        template = rng.choice(by_family[block.pop()])
        level = difficulty if difficulty is not None else rng.choices(DIFFICULTIES, DIFFICULTY_WEIGHTS)[0]
        values = template.draw(rng, level, SHARED_DIGITS_RATE if split == "train_shared" else 0.0)
        prompt = rng.choice(template.wordings).format(**values)
        if split == "train_broad":
            prompt, _ = broaden(prompt, template.expression.format(**values), rng)
        yield template, values, prompt, level


@functools.lru_cache(maxsize=1)
def _train_keys() -> frozenset[tuple[str, str]]:
    """(template id, expression) of the first EXCLUDED_TRAIN_TASKS default train tasks: held-out excludes
    the same problem in any wording. Built once per process; solving is skipped because only keys matter."""
    stream = _draws("train", TRAIN_SEED, None)
    keys = set()
    for _ in range(EXCLUDED_TRAIN_TASKS):
        template, values, _, _ = next(stream)
        keys.add((template.id, template.expression.format(**values)))
    return frozenset(keys)


@functools.lru_cache(maxsize=1)
def _heldout_keys() -> frozenset[tuple[str, str]]:
    """(template id, expression) of the default eval's first EXCLUDED_HELDOUT_TASKS in-template tasks."""
    return frozenset((t.meta["template"], t.meta["expression"])
                     for t in make_tasks(EXCLUDED_HELDOUT_TASKS, EVAL_SEED, "heldout_in"))


def make_tasks(n: int, seed: int, split: str = "train", difficulty: int | None = None) -> list[Task]:
    """`n` calculator tasks, deterministic in the arguments; the first k of n equal make_tasks(k, ...).

    split: "train" and "heldout_in" draw TRAIN_TEMPLATES (heldout_in never repeats one of the first
    EXCLUDED_TRAIN_TASKS train problems), "heldout_out" draws HELDOUT_TEMPLATES, "rl_extra" (prompts for RL
    only, never demonstrated) RL_TEMPLATES, "train_shared" TRAIN_TEMPLATES with numbers drawn to share
    digits (`shared_digits`; never one of the default eval's in-template problems), "heldout_fresh" the
    second out-of-template set (`calculator_fresh.FRESH_TEMPLATES`), "train_broad" TRAIN_TEMPLATES in more
    surface forms (`calculator_broad.broaden`; never one of the default eval's in-template problems).
    difficulty: 1..3, or
    None for the DIFFICULTY_WEIGHTS mix.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES} or None, got {difficulty!r}")
    excluded = {"heldout_in": _train_keys, "train_shared": _heldout_keys, "train_broad": _heldout_keys}.get(split, frozenset)()
    stream = _draws(split, seed, difficulty)
    tasks = []
    while len(tasks) < n:
        template, values, prompt, level = next(stream)
        expression = template.expression.format(**values)
        if (template.id, expression) in excluded:
            continue
        steps, answer = template.solve(values)
        meta = {
            "template": template.id,
            "family": template.family,
            "split": split,
            "expression": expression,
            "steps": steps,
            "milestones": [calculator(s) for s in steps[:-1]],  # intermediate results (rl.algorithm.process_reward)
            "difficulty": level,
            "values": values,
        }
        tasks.append(Task(id=f"calc-{split}-{seed}-{len(tasks)}", prompt=prompt, answer=answer, meta=meta))
    return tasks
