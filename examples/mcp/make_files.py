"""Writes the task files of recipes/mcp.yaml: "how much do N items cost" at the shop of
examples/mcp/server.py, each with a demonstration that looks the price up and multiplies through the
server's tools (`python examples/mcp/make_files.py`; seeded). The held-out file asks about items the
training file never names.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from server import PRICES  # noqa: E402 - the server's own price list

WORDINGS = ("How much do {n} {item}s cost, in dollars?", "What do you pay for {n} {item}s at the shop, in dollars?",
            "You buy {n} {item}s. What is the total, in dollars?")
HELDOUT_ITEMS = ("kettle", "marker", "scarf", "vase", "yarn")


def call(name: str, **arguments) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def row(rng: random.Random, items: list[str]) -> dict:
    item, n = rng.choice(items), rng.randrange(2, 40)
    total = n * PRICES[item]
    return {"question": rng.choice(WORDINGS).format(n=n, item=item), "answer": str(total), "demonstration": [
        {"role": "assistant", "content": f"I look up the price of a {item}.", "tool_calls": [call("price", item=item)]},
        {"role": "assistant", "content": f"Now {n} of them.", "tool_calls": [call("multiply", a=n, b=PRICES[item])]},
        {"role": "assistant", "content": f"{n} {item}s cost {total} dollars.\n<answer>{total}</answer>"}]}


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> None:
    rng = random.Random(0)
    train_items = [i for i in PRICES if i not in HELDOUT_ITEMS]
    train, seen = [], set()
    while len(train) < 200:
        r = row(rng, train_items)
        if r["question"] not in seen:
            seen.add(r["question"])
            train.append(r)
    write(HERE / "train.jsonl", train)
    write(HERE / "test.jsonl", [row(rng, list(HELDOUT_ITEMS)) for _ in range(50)])


if __name__ == "__main__":
    main()
