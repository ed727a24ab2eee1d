"""Breadth of wording for training (split `train_broad`): the training templates' problems in more
surface forms, rewritten programmatically.

A prompt drawn from a training template is rewritten by a random subset of: the question first, a
distractor sentence holding a number the answer does not use, small numbers written as words, and
phrase synonyms. A rewrite is kept only when every number of the reference expression is still in
the text (as digits or as its word), so the problem stays solvable as written and the answer is
unchanged. These forms are the issue's list of wording dimensions, written without reference to any
held-out wording.
"""

from __future__ import annotations

import random
import re

from agentic_rl.data.calculator_templates import NAMES

WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen twenty").split()
_DISTRACTORS = ("{name} is {n} years old.", "The shop opened {n} years ago.", "It is {n} degrees outside today.",
                "The street has {n} houses.", "{name}'s favourite number is {n}.", "The radio played {n} songs that morning.")
_SYNONYMS = (("How many", "What number of"), ("altogether", "in total"), ("buys", "purchases"),
             ("shared equally", "split evenly"), ("counted", "tallied"), ("gets", "receives"),
             ("total cost", "full price"), ("How much", "What amount"))
_SENTENCES = re.compile(r"(?<=[.?!])\s+")
_NUMBER = re.compile(r"(?<!\d\.)(?<!\d)\d+(?!\.?\d)")  # an integer, not part of a decimal


def broaden(prompt: str, expression: str, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """The prompt rewritten (and the names of the rewrites applied), or unchanged when no rewrite
    applies or a rewrite lost a number of the expression."""
    sentences = _SENTENCES.split(prompt.strip())
    if len(sentences) < 2 or not sentences[-1].endswith("?"):  # bare arithmetic, one-sentence questions
        return prompt, ()
    applied = []
    question, facts = sentences[-1], sentences[:-1]
    if rng.random() < 0.5:
        facts.insert(rng.randint(0, len(facts)), rng.choice(_DISTRACTORS).format(name=rng.choice(NAMES),
                                                                                  n=rng.randint(3, 90)))
        applied.append("distractor")
    text = " ".join([question, *facts] if rng.random() < 0.5 else [*facts, question])
    if text.startswith(question):
        applied.append("question_first")
    if rng.random() < 0.5:
        worded = []

        def word(m: re.Match) -> str:
            if int(m[0]) <= 20 and rng.random() < 0.7:
                worded.append(m[0])
                return WORDS[int(m[0])]
            return m[0]
        text = _NUMBER.sub(word, text)
        if worded:
            applied.append("number_words")
    if rng.random() < 0.5:
        present = [(a, b) for a, b in _SYNONYMS if a in text]
        if present:
            a, b = rng.choice(present)
            text = text.replace(a, b, 1)
            applied.append("synonym")
    return (text, tuple(applied)) if applied and solvable(text, expression) else (prompt, ())


def solvable(text: str, expression: str) -> bool:
    """Every number of the expression occurs in the text, as digits or as its word."""
    shown = {int(x) for x in _NUMBER.findall(text)}
    shown |= {i for i, w in enumerate(WORDS) if re.search(rf"\b{w}\b", text, re.IGNORECASE)}
    return all(int(x) in shown for x in _NUMBER.findall(expression))
