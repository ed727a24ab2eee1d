"""Search-R1: questions answered by searching a local corpus (Search-R1, Jin et al. 2025).

The policy writes `<search>query</search>`; generation stops there; a BM25 retriever returns the top
passages inside `<information>...</information>` in the same assistant turn (masked: never trained
on); the answer goes in `<answer>...</answer>` and is scored by exact match (F1 is logged).

Options (a recipe's `env.options`):
  corpus            "kb" (the generated knowledge base, default) or a JSONL file of {id, title, text}
  top_k             passages per search (default 3)
  max_chars         character budget of one <information> block (default 600)
  search            false: no search action at all (the paper's no-retrieval baseline)
  format_weight     the gated format term of the reward (default 0.1)
  fewshot           prepend two worked examples (one- and two-hop) as real chat turns
  synth_tasks       a task file of `agentic-rl synth webshaper` (JSONL): the `synth` split draws from it

Splits: `train`, `heldout_in`, `heldout_out` (data/search_qa.py); `synth` (with `synth_tasks`), the
synthesized questions of that file (for RL: they have no demonstration); `heldout_multihop`, WebShaper questions of two
and three layers about held-out entities, made here (synth/webshaper.py), never in `synth`'s files.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentic_rl.data import search_qa as data
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.formats import SEARCH_R1
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.errors import UserError
from agentic_rl.faults import InfrastructureError
from agentic_rl.rewards.base import Score, extract_answer
from agentic_rl.types import Task, Trajectory

SYSTEM_PROMPT = "You answer questions about a fictional world. Search for the facts you need; do not guess."
NO_SEARCH_PROMPT = "You answer questions about a fictional world. Answer directly."


@functools.lru_cache(maxsize=4)
def retriever(corpus: str = "kb"):
    """Built once per corpus and shared by every episode (an index is read-only)."""
    from agentic_rl.tools.search import BM25Retriever

    return BM25Retriever(data.load_corpus(corpus))


class SearchEnv(ToolEnv):
    def __init__(self, options: Mapping[str, Any]):
        self.top_k = int(options.get("top_k", 3))
        self.max_chars = int(options.get("max_chars", 600))
        self.retriever = retriever(str(options.get("corpus", "kb")))
        with_search = bool(options.get("search", True))
        fewshot = fewshot_messages(self.top_k, self.max_chars) if options.get("fewshot") and with_search else ()
        super().__init__([self.search] if with_search else [], SYSTEM_PROMPT if with_search else NO_SEARCH_PROMPT,
                         fewshot=fewshot, format=SEARCH_R1)

    def search(self, query: str) -> str:
        """Search the corpus; returns the top passages.

        Args:
            query: what to look for.
        """
        from agentic_rl.tools.search import format_passages

        try:  # any query is valid (`BM25Retriever.search` never raises on one): a failure is the index's
            found = self.retriever.search(query, top_k=self.top_k)
        except Exception as e:  # noqa: BLE001
            raise InfrastructureError(f"the search index failed: {type(e).__name__}: {e}") from e
        return format_passages(found, self.max_chars) if found else "No results."


@dataclass(frozen=True)
class ExactMatchReward:
    """1.0 when the normalized answer equals the gold answer or an alias (SQuAD normalization);
    token F1 is logged, not rewarded; the format term is gated as everywhere."""

    format_weight: float = 0.1

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        answer = extract_answer(trajectory.final_text)
        golds = [str(task.answer), *task.meta.get("aliases", ())]
        em = data.exact_match(answer, golds) if answer is not None else 0.0
        f1 = data.token_f1(answer, golds) if answer is not None else 0.0
        well_formed = float(answer is not None and trajectory.num_tool_errors == 0 and trajectory.terminated)
        value = em if em else self.format_weight * well_formed
        return Score(value, {"correct": em, "f1": f1, "format": well_formed})


def demonstration(task: Task, env: SearchEnv) -> list[dict]:
    if "chain" not in task.meta:
        raise UserError(f"env search_r1: task {task.id} (a synthesized question) has no demonstration; "
                        "its split trains by RL (rl.tasks.splits), not SFT")
    return data.demonstration(task, env.search)


@functools.lru_cache(maxsize=4)
def fewshot_messages(top_k: int, max_chars: int) -> tuple[dict, ...]:
    """Two worked examples from the training templates: a one-hop and a two-hop question."""
    env = SearchEnv({"top_k": top_k, "max_chars": max_chars})
    tasks = data.make_tasks(40, 777, "train")
    picks = [next(t for t in tasks if t.meta["hops"] == h) for h in (1, 2)]
    return tuple(m for t in picks for m in [{"role": "user", "content": t.prompt}, *demonstration(t, env)])


def make_tasks(split: str, n: int, seed: int, synth_file: str = "") -> list[Task]:
    if split == "heldout_multihop":
        from agentic_rl.synth.webshaper import synthesize

        return synthesize(n, seed, "heldout_multihop")
    if split == "synth":
        return _synth_tasks(synth_file, n, seed)
    return data.make_tasks(n, seed, split)


def _synth_tasks(path: str, n: int, seed: int) -> list[Task]:
    """`n` tasks of the file, drawn with replacement by seed (a file smaller than a run's draws repeats)."""
    import random

    from agentic_rl.synth.files import read_tasks

    if not path:
        raise UserError("env search_r1: the synth split reads env.options.synth_tasks (a file of "
                        "`agentic-rl synth webshaper`); none is named")
    pool = read_tasks(path)
    rng = random.Random(f"search_r1/synth/{seed}")
    return [pool[rng.randrange(len(pool))] for _ in range(n)]


def bind(options: Mapping[str, Any]) -> EnvSpec:
    """The spec with a `synth` split reading the options' task file, where they name one."""
    synth_file = str(options.get("synth_tasks", ""))
    if not synth_file:
        return replace(SPEC, bind=None)
    return replace(SPEC, tasks=lambda split, n, seed: make_tasks(split, n, seed, synth_file), bind=None,
                   splits=(*SPEC.splits, "synth"))


SPEC = EnvSpec(
    name="search_r1",
    make_env=SearchEnv,
    make_reward=lambda options: ExactMatchReward(float(options.get("format_weight", 0.1))),
    tasks=make_tasks,
    splits=(*data.SPLITS, "heldout_multihop"),  # and "synth" with env.options.synth_tasks (`bind`)
    options=("top_k", "max_chars", "corpus", "search", "format_weight", "synth_tasks"),
    demonstration=demonstration,
    bind=bind,
)
SPECS = (SPEC,)
