"""Self-distillation with privileged context: the policy itself, shown a worked example, is the
on-policy teacher of the policy without it (`distill.privileged`).

On a kind of problem the policy never solves, GRPO's group has no reward spread and nothing to
reinforce. The same model with a worked solution in its context often knows the next token the
student should write; its distribution at every position of the student's own episode is a dense
signal no reward gives (OPSD, Zhao et al. 2026, "Self-Distilled Reasoner: On-Policy
Self-Distillation"; with feedback instead of a solution, Hübotter et al. 2026; for agentic
trajectories, Penaloza et al. 2026, "Privileged Information Distillation for Language Models").

The teacher reads the student's episode with one more exchange in its prompt: a worked example
(the env's own demonstration, `EnvSpec.demonstration`) as real chat turns between the system prompt
and the question, where a few-shot prompt puts it. Which example (`PRIVILEGED`):

- `solution`: the demonstration of the very task — the reference solution itself. The teacher can
  read the answer off its context; a student pushed towards it may learn the answer's shape rather
  than how to get it ("privileged information leakage").
- `similar`: the demonstration of another task of the same kind (the task meta field
  `distill.privileged_key`, the template by default), drawn from the task's own split: how such a
  problem is solved, not this one's answer. A task whose kind has no other member in the pool gets
  its own solution.

Token layout: the teacher's row is the student's row with the example's tokens inserted into the
first prompt (`insertion`, found by rendering the prompt with and without the example; anything but a
pure insertion is refused). The trained positions are the same tokens in the same order, so the
teacher's (N, V) log-probabilities line up with the student's. The teacher's weights are the
policy's as they are at that moment, without gradient (the teacher is a stop-gradient target), or,
with one model in `distill.teachers`, that model's, frozen: the RL stage's starting checkpoint as
the teacher anchors the target, where the moving policy's drifts with every update it causes. A
trajectory whose context started over (`Turn.restart`) gets the example in its first context only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import torch

from agentic_rl.envs.base import close_env
from agentic_rl.envs.formats import bos_text
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import policy_forward
from agentic_rl.models.precision import autocast
from agentic_rl.registry import Registry
from agentic_rl.trainer.batching import make_batch
from agentic_rl.trainer.teachers import load_frozen
from agentic_rl.types import Task, Trajectory

POOL_SIZE = 256  # tasks drawn once per split, where `similar` looks for another task of the kind

# distill.privileged: (task, same-kind tasks of its split) -> the task whose demonstration is shown
PRIVILEGED: Registry[Callable[[Task, Sequence[Task]], Task]] = Registry("privileged context")
PRIVILEGED.register("solution")(lambda task, kin: task)
PRIVILEGED.register("similar")(lambda task, kin: next((k for k in kin if k.prompt != task.prompt), task))


def insertion(plain: Sequence[int], privileged: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """(at, block) with privileged == plain[:at] + block + plain[at:]; ValueError when `privileged`
    is not `plain` with one block inserted."""
    at = 0
    while at < min(len(plain), len(privileged)) and plain[at] == privileged[at]:
        at += 1
    extra = len(privileged) - len(plain)
    if extra < 0 or tuple(privileged[at + extra:]) != tuple(plain[at:]):
        raise ValueError("the privileged prompt is not the student's prompt with a worked example inserted")
    return at, tuple(privileged[at : at + extra])


def with_example(messages: Sequence[Mapping], example: Sequence[Mapping]) -> list[dict]:
    """`messages` (an env's prompt) with `example` inserted before its last user message."""
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    return [*map(dict, messages[:last]), *map(dict, example), *map(dict, messages[last:])]


class PrivilegedTeacher:
    """The policy, with a worked example in its prompt, scoring the student's micro-batches; the
    same interface as `teachers.Teachers` (one teacher, no routes)."""

    def __init__(self, model, tokenizer, spec, options: Mapping, choose: Callable, key: str, default_split: str):
        self.model, self.tokenizer, self.spec, self.options = model, tokenizer, spec, dict(options)
        self.choose, self.key, self.default_split = choose, key, default_split
        self._pools: dict[str, list[Task]] = {}
        self._prompts: dict[str, tuple[int, ...]] = {}  # task id -> the privileged prompt's ids

    def chosen(self, task: Task) -> list[int]:
        return [0]

    @torch.no_grad()
    def logprobs(self, mb, precision: str, temperature: float) -> torch.Tensor:
        """(N, V) log-probabilities of the privileged policy at the N trained positions of the
        micro-batch `mb` (`loss_terms.MicroBatch`: the student's rows and their batch)."""
        batch = mb.batch
        shown = make_batch([self.row(t) for t in mb.rows], self.tokenizer.pad_token_id).to(batch.input_ids.device)
        with autocast(precision, batch.input_ids.device):
            full = policy_forward(self.model, shown, temperature, full=True).full
        if full.shape[0] != int(batch.loss_mask.sum()):
            raise RuntimeError(f"privileged teacher: {full.shape[0]} trained positions for the student's "
                               f"{int(batch.loss_mask.sum())}")
        return full

    def row(self, t: Trajectory) -> Trajectory:
        """The student's trajectory with the worked example inserted into its first prompt."""
        first = t.turns[0]
        at, block = insertion(first.obs_ids, self.prompt(t.task))
        shown = replace(first, obs_ids=(*first.obs_ids[:at], *block, *first.obs_ids[at:]))
        return replace(t, turns=(shown, *t.turns[1:]))

    def prompt(self, task: Task) -> tuple[int, ...]:
        """The ids of the task's prompt with the chosen worked example before the question."""
        if task.id not in self._prompts:
            example = self.choose(task, self.kin(task))
            env = self.spec.make_env(self.options)
            try:
                solved = [{"role": "user", "content": example.prompt}, *self.spec.demonstration(example, env)]
                messages = with_example(env.reset(task), solved)
                text = bos_text(env.format, self.tokenizer) + env.format.render_prompt(messages, env.tool_schemas)
            finally:
                close_env(env)
            self._prompts[task.id] = tuple(self.tokenizer.encode(text, add_special_tokens=False))
        return self._prompts[task.id]

    def kin(self, task: Task) -> list[Task]:
        """The pool's tasks of the same kind as `task` (its split's pool, drawn once)."""
        split = str(task.meta.get("split", self.default_split))
        if split not in self._pools:
            self._pools[split] = self.spec.tasks(split, POOL_SIZE, 0)
        kind = task.meta.get(self.key)
        return [k for k in self._pools[split] if kind is not None and k.meta.get(self.key) == kind]


def privileged_teacher(cfg, model, tokenizer, spec) -> PrivilegedTeacher | None:
    """The recipe's privileged self-teacher (`distill.privileged`), or None."""
    d = cfg.distill
    if not d.privileged:
        return None
    if spec.demonstration is None:
        raise ValueError(f"distill.privileged: env {spec.name!r} has no demonstrations to show")
    if d.teachers:
        model = load_frozen(d.teachers[0], tokenizer, device_of(model))
    return PrivilegedTeacher(model, tokenizer, spec, cfg.env.options, PRIVILEGED.get(d.privileged),
                             d.privileged_key, cfg.rl.tasks.splits[0])
