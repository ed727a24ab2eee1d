"""Writes the example task files of recipes/tasks.yaml: shopping and travel word problems with
numeric answers, each with a demonstration that calls the calculator once (`python
examples/tasks/make_files.py`; seeded, so the files are the same on every machine).

A user's own files look the same: one JSON object a line with a `question`, an `answer` and,
for SFT, a `demonstration` (docs/envs/tasks.md).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
TEMPLATES = [
    ("A jacket costs ${a} and is {p}% off. What does it cost now, in dollars?", "{a} * (100 - {p}) / 100"),
    ("A meal costs ${a} and you leave a {p}% tip. How much do you pay in all, in dollars?", "{a} * (100 + {p}) / 100"),
    ("A train travels at {a} km per hour for {p} hours. How many km does it cover?", "{a} * {p}"),
    ("You buy {p} notebooks at ${a} each. How much do you spend, in dollars?", "{p} * {a}"),
    ("A tank holds {a} liters and {p} liters are used. How many liters are left?", "{a} - {p}"),
]


def row(rng: random.Random) -> dict:
    question, expression = rng.choice(TEMPLATES)
    a, p = rng.choice(range(20, 400, 4)), rng.choice([5, 10, 15, 20, 25, 30, 40, 50])
    expr = expression.format(a=a, p=p)
    answer = eval(expr)  # the templates' own arithmetic, nothing a user wrote
    answer = int(answer) if float(answer).is_integer() else round(answer, 2)
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expr}}}
    demo = [{"role": "assistant", "content": "I will compute it with the calculator.", "tool_calls": [call]},
            {"role": "assistant", "content": f"The answer is {answer}.\n<answer>{answer}</answer>"}]
    return {"question": question.format(a=a, p=p), "answer": str(answer), "demonstration": demo}


def main() -> None:
    rng = random.Random(0)
    rows, seen = [], set()
    while len(rows) < 300:
        r = row(rng)
        if r["question"] not in seen:
            seen.add(r["question"])
            rows.append(r)
    for name, part in (("train.jsonl", rows[:240]), ("test.jsonl", rows[240:])):
        (HERE / name).write_text("".join(json.dumps(r) + "\n" for r in part))
        print(f"wrote {HERE / name}: {len(part)} tasks")


if __name__ == "__main__":
    main()
