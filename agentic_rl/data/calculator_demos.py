"""Demonstrations of the calculator tasks: the messages after the user turn that solve a task with
the calculator, written programmatically for SFT in one of several styles (one call per step, a plan
first, one compound call, a mix, or a chain of named sub-expressions into one call).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentic_rl.data.calculator import TEMPLATES_BY_ID, Template
from agentic_rl.registry import Registry
from agentic_rl.tools.calculator import calculator
from agentic_rl.types import Task

_GENERIC_NOTE = "I need to compute {step}."
_TOOL_PHRASES = (
    "I will use the calculator.",
    "Let me use the calculator.",
    "I'll compute it with the calculator.",
)

_STEP = re.compile(r"^\(?\{(\w+)\} ([-+*/]) \{(\w+)\}\)?$")
_OPENING = {"*": "multiply {a} by {b}", "/": "divide {a} by {b}", "+": "add {a} and {b}", "-": "subtract {b} from {a}"}
_ON_RESULT = {"*": "multiply by {b}", "/": "divide by {b}", "+": "add {b}", "-": "subtract {b}"}
_INTO_RESULT = {"*": "multiply by {a}", "/": "divide {a} by that", "+": "add {a}", "-": "subtract that from {a}"}


def plan_clauses(step_formats: tuple[str, ...], values: Mapping[str, Any]) -> list[str] | None:
    """The steps of a solution in words ("multiply 8 by 55", "subtract 171"), one clause per calculator
    call, read off the template's step formats; None when a step is not one binary operation or a value
    it names is missing."""
    clauses = []
    for fmt in step_formats:
        m = _STEP.match(fmt)
        if m is None or any(k != "prev" and k not in values for k in (m[1], m[3])):
            return None
        a, op, b = m.groups()
        table = _INTO_RESULT if b == "prev" else _ON_RESULT if a == "prev" else _OPENING
        clauses.append(table[op].format(a=values.get(a), b=values.get(b)))
    return clauses


@dataclass(frozen=True)
class _Plan:
    """What a demonstration says, in a style: its calls and the sentence before each."""

    steps: list[str]  # the calculator calls, in order
    notes: tuple  # each call's sentence (a template's notes; a tuple of choices or a format string each)
    lead: str = ""  # said before the first call's sentence
    clauses: list[str] | None = None  # "plan": every call in words, said before the first


Style = Callable[[Task, "Template | None", Mapping[str, Any], random.Random], _Plan]
DEMO_STYLES: Registry[Style] = Registry("demonstration style")


def _word_problem(template: Template | None) -> bool:
    return template is not None and template.family != "bare"


@DEMO_STYLES.register("steps")
def _steps(task: Task, template: Template | None, values: Mapping[str, Any], rng: random.Random) -> _Plan:
    return _Plan(task.meta["steps"], template.notes if template is not None else ())


@DEMO_STYLES.register("plan")
def _plan(task: Task, template: Template | None, values: Mapping[str, Any], rng: random.Random) -> _Plan:
    plan = _steps(task, template, values, rng)
    return replace(plan, clauses=plan_clauses(template.steps, values)) if _word_problem(template) else plan


@DEMO_STYLES.register("compound")
def _compound(task: Task, template: Template | None, values: Mapping[str, Any], rng: random.Random) -> _Plan:
    plan = _steps(task, template, values, rng)
    if not (_word_problem(template) and len(plan.steps) > 1):
        return plan
    return _Plan([template.expression.format(**values)], plan.notes[-1:])  # the note that names the answer


@DEMO_STYLES.register("chain")
def _chain(task: Task, template: Template | None, values: Mapping[str, Any], rng: random.Random) -> _Plan:
    plan = _steps(task, template, values, rng)
    if not (_word_problem(template) and len(plan.steps) > 1):
        return plan
    lead = " ".join(_note(n, rng, values, _partial(template, values, k)) for k, n in enumerate(plan.notes[:-1]))
    return _Plan([template.expression.format(**values)], plan.notes[-1:], lead + " ")


@DEMO_STYLES.register("mixed")
def _mixed(task: Task, template: Template | None, values: Mapping[str, Any], rng: random.Random) -> _Plan:
    style = _compound if random.Random(f"mixed:{task.id}").random() < 0.5 else _steps
    return style(task, template, values, rng)


def demonstration(task: Task, seed: int | str | None = None, style: str = "steps",
                  recover: float = 0.0) -> list[dict[str, Any]]:
    """The messages after the user turn that solve `task` with the calculator (hermes tool-call style).

    Phrasing is drawn from a rng seeded by the task id (or `seed`), so demos vary across tasks but a
    task's demo is reproducible. `style` (a DEMO_STYLES name):
    - "steps": one call per step of the template, each after its own sentence;
    - "plan": a word problem's first action opens with every call in words ("Plan: multiply 8 by 55,
      then subtract 171."), and each later call restates its clause ("Then subtract 171."), so every
      decision of the episode is taken in the first words after the prompt;
    - "compound": a multi-step word problem is one call of its whole expression ("8 * 55 - 171"),
      written as bare arithmetic is; a wrong operation is then one sampled token away from the right
      one, inside a single call, instead of a second call the policy must think of making;
    - "mixed": a multi-step word problem is demonstrated as "compound" or as "steps", half and half
      (a coin seeded by the task id alone), so the policy is shown both one call and a chain of two;
    - "chain": one call of the whole expression as in "compound", but the call's sentence first names
      each earlier step's expression ("The baker makes 8 * 55 cookies. After selling 171, 8 * 55 - 171
      cookies are left."): the compound is then built by copying a sub-expression the policy has just
      written, one operation at a time, instead of composed in one go.

    `recover`: the share of word problems (a coin seeded by the task id) whose one-call demonstration
    first makes the commonest mistake of a trained policy, the unit of its sentence carried into
    the call ("86 * 159 km"), reads the calculator's error and calls again without it. The mistaken
    action has `"weight": 0`: it stays in the sequence the policy reads but out of the loss, so
    the demonstration teaches the recovery, not the mistake.
    """
    rng = random.Random(f"demo:{task.id}" if seed is None else seed)
    template = TEMPLATES_BY_ID.get(task.meta.get("template", ""))
    values = task.meta.get("values", {})
    plan = DEMO_STYLES.get(style)(task, template, values, rng)
    steps, notes, clauses = plan.steps, plan.notes, plan.clauses
    messages: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        sentence = plan.lead + _note(notes[i] if i < len(notes) else _GENERIC_NOTE, rng, values, step)
        if clauses:
            head = "Plan: " + ", then ".join(clauses) if i == 0 else "Then " + clauses[i]
            sentence = f"{head}. {sentence}"
        recovering = recover and _word_problem(template) and len(steps) == 1 and random.Random(f"recover:{task.id}").random() < recover
        unit = _unit_after(sentence, step) if recovering else ""
        if unit:
            messages += _call(f"{sentence} {rng.choice(_TOOL_PHRASES)}", f"{step} {unit}", weight=0)
            sentence = f"I must leave out the word {unit}."
        messages += _call(f"{sentence} {rng.choice(_TOOL_PHRASES)}", step)
    messages.append(
        {"role": "assistant", "content": f"The answer is {task.answer}.\n<answer>{task.answer}</answer>"}
    )
    return messages


def _call(content: str, expression: str, weight: int = 1) -> list[dict[str, Any]]:
    """An assistant message calling the calculator (with `weight` 0: shown, not trained) and the
    tool's reply."""
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
    action = {"role": "assistant", "content": content, "tool_calls": [call], **({} if weight else {"weight": 0})}
    return [action, {"role": "tool", "name": "calculator", "content": calculator(expression)}]


def _unit_after(sentence: str, step: str) -> str:
    """The word the sentence puts right after the expression ("kilometers" in "The distance is
    86 * 159 kilometers."), or "" when none follows it."""
    after = re.match(r" ([A-Za-z]+)", sentence.split(step, 1)[1]) if step in sentence else None
    return after[1] if after else ""


def _note(note: str | tuple[str, ...], rng: random.Random, values: Mapping[str, Any], step: str) -> str:
    """A demonstration sentence: `note` (a choice of one, drawn from `rng`) with the step filled in."""
    note = rng.choice(note) if isinstance(note, tuple) else note
    try:
        return note.format(**values, step=step)
    except KeyError:  # a task built elsewhere, without the slot values this note names
        return _GENERIC_NOTE.format(step=step)


def _partial(template: Template, values: Mapping[str, Any], k: int) -> str:
    """Step k's calculation as one expression of the task's numbers: "{prev}" replaced by step k-1's,
    in parentheses unless it is a product (8 * 55 - 171 needs none; (40 + 24) / 8 does)."""
    expr = ""
    for fmt in template.steps[: k + 1]:
        inner = expr if not expr or re.fullmatch(r"[\d\s*]+", expr) else f"({expr})"
        expr = fmt.format(**values, prev=inner)
    return expr
