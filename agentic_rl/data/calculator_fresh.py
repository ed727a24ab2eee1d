"""The second out-of-template held-out set (split `heldout_fresh`): wordings written for it alone.

The first held-out set (HELDOUT_TEMPLATES, split `heldout_out`) was looked at while the main recipe
was tuned, so it no longer measures transfer to wordings nobody chose for. These templates were
written before any experiment on wording breadth or exploration began, from scenarios and sentence
patterns that occur in no other template set (tested on slot-normalized word 4-grams), and include
the surface forms a user's problems have and ours lacked: the question first, a unit in the question,
a distractor sentence with a number that must not be used. Nothing derived from them may enter
training or any choice; the split is not in a recipe's `eval.splits` and is evaluated once, at the
end (`--set eval.splits=[heldout_in,heldout_out,heldout_fresh]`), as the figure that counts.
"""

from __future__ import annotations

from agentic_rl.data.calculator_templates import NAMES, Template, between, product

# fmt: off
FRESH_TEMPLATES: tuple[Template, ...] = (
    Template("seed_packets", "one_step",
        ("How many seeds does {name} get from {packets} packets if every packet contains {per} seeds?",
         "Every packet of sunflower seeds contains {per} seeds. {name} opens {packets} of those packets. "
         "Count the seeds."),
        {"name": NAMES, "packets": "count", "per": "value"},
        ("{packets} * {per}",), "{packets} * {per}", ("That makes {step} seeds.",)),
    Template("elevator_room", "one_step",
        ("An elevator may carry at most {limit} kilograms. People weighing {load} kilograms in total are "
         "already inside. How many more kilograms can it take?",
         "By how many kilograms can a lift rated for {limit} kg still be loaded when {load} kg are aboard?"),
        {"limit": "big", "load": between("limit", 3)},
        ("{limit} - {load}",), "{limit} - {load}", ("It can take {step} more kilograms.",)),
    Template("museum_weekend", "one_step",
        ("On Saturday a museum counted {a} visitors and on Sunday {b} visitors. The museum opened {years} years "
         "ago. How many visitors came that weekend?",
         "What was the weekend attendance of a museum that welcomed {a} guests on Saturday and {b} on Sunday?"),
        {"a": "big", "b": "big", "years": "count"},
        ("{a} + {b}",), "{a} + {b}", ("The weekend brought {step} visitors.",)),
    Template("printer_rate", "one_step",
        ("A printer finishes {total} pages in {minutes} minutes, always at the same speed. How many pages "
         "per minute is that?",
         "Working steadily for {minutes} minutes, an office printer outputs {total} sheets. Find its "
         "pages per minute."),
        {"minutes": "count", "rate": "value", "total": product("minutes", "rate")},
        ("{total} / {minutes}",), "{total} / {minutes}", ("It prints {step} pages per minute.",)),
    Template("freight_cars", "one_step",
        ("A freight train pulls {cars} cars, and each car carries {tons} tonnes of coal. What is the whole "
         "load in tonnes?",
         "In tonnes, how much coal travels on {cars} wagons loaded with {tons} tonnes each?"),
        {"cars": "count", "tons": "value"},
        ("{cars} * {tons}",), "{cars} * {tons}", ("The load is {step} tonnes.",)),
    Template("bank_balance", "one_step",
        ("{name}'s account holds {bal} euros. After a withdrawal of {w} euros, what balance is left?",
         "Which balance in euros remains when {w} euros are taken out of an account with {bal} euros in it?"),
        {"name": NAMES, "bal": "big", "w": between("bal", 2)},
        ("{bal} - {w}",), "{bal} - {w}", ("The balance is {step} euros.",)),
    Template("bike_rental", "two_step",
        ("{name} rents a bike. It costs {rate} dollars for every hour, {name} keeps it {hours} hours, and "
         "there is a {fee} dollar booking fee. What does the rental cost in total?",
         "What is the full price, in dollars, of a {hours}-hour bike rental charged {rate} dollars an hour "
         "plus a one-time fee of {fee} dollars?"),
        {"name": NAMES, "hours": "count", "rate": "value", "fee": "value"},
        ("{hours} * {rate}", "{prev} + {fee}"), "{hours} * {rate} + {fee}",
        ("The hours cost {step} dollars.", "The rental costs {step} dollars.")),
    Template("bottle_cases", "two_step",
        ("A shop receives {cases} cases holding {per} bottles each and sells {sold} bottles by noon. "
         "How many bottles does it still have?",
         "How many bottles remain unsold when {sold} bottles have gone from a delivery of {cases} cases "
         "of {per} bottles?"),
        {"cases": "count", "per": "value", "total": product("cases", "per"), "sold": between("total")},
        ("{cases} * {per}", "{prev} - {sold}"), "{cases} * {per} - {sold}",
        ("The delivery is {step} bottles.", "{step} bottles are left.")),
    Template("class_trip", "two_step",
        ("A class of {students} students hires a bus for {bus} dollars, shared equally, and each student "
         "also buys a {ticket} dollar museum ticket. How much does the trip cost one student?",
         "Per student, what does a trip cost when {students} students share a {bus} dollar bus evenly and "
         "each spends {ticket} dollars on entry?"),
        {"students": "count", "ticket": "value", "bus": lambda v, rng, d: v["students"] * rng.randint(5, 40)},
        ("{bus} / {students}", "{prev} + {ticket}"), "{bus} / {students} + {ticket}",
        ("The bus costs {step} dollars a student.", "The trip costs {step} dollars a student.")),
    Template("garden_fence", "two_step",
        ("A farmer fences a field shaped like a rectangle: one side is {length} meters, the side next to it "
         "{width} meters. How long is the whole fence in meters?",
         "Walking once around a rectangular pond whose sides measure {length} meters and {width} meters, "
         "how far does {name} walk in meters?"),
        {"name": NAMES, "length": "value", "width": "value"},
        ("{length} + {width}", "{prev} * 2"), "({length} + {width}) * 2",
        ("Half the way around is {step} meters.", "The fence is {step} meters long.")),
    Template("recipe_scale", "two_step",
        ("A soup recipe for {base} people uses {grams} grams of lentils. How many grams of lentils does "
         "the soup need for {people} people?",
         "Cooking for {people} diners, how many grams of rice does {name} need if {grams} grams feed "
         "{base} diners?"),
        {"name": NAMES, "base": "count", "people": "count",
         "grams": lambda v, rng, d: v["base"] * rng.randint(20, 90)},
        ("{grams} / {base}", "{prev} * {people}"), "{grams} / {base} * {people}",
        ("One person needs {step} grams.", "The soup needs {step} grams.")),
    Template("phone_plan", "two_step",
        ("A phone plan costs {monthly} dollars a month and includes {gigabytes} GB of data. {name} keeps it "
         "for {months} months and paid a {fee} dollar activation charge at the start. How many dollars did "
         "{name} pay altogether?",
         "Counting a one-time {fee} dollar activation charge, what do {months} months of a {monthly} dollar "
         "monthly phone plan cost?"),
        {"name": NAMES, "monthly": "value", "months": "count", "fee": "value", "gigabytes": "count"},
        ("{monthly} * {months}", "{prev} + {fee}"), "{monthly} * {months} + {fee}",
        ("The months cost {step} dollars.", "Altogether {step} dollars.")),
)
# fmt: on
