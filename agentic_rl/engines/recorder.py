"""What the recording proxy keeps of an agent's calls, and the exact training rows it makes of them.

An agent program talks to the proxy through the OpenAI chat API; every call of one episode (the
episode id is in the URL: `/episodes/{id}/v1`) is recorded as the token ids the policy was fed, the
ids it sampled and their logprobs.

**No re-tokenization of the policy's own words.** When a request's history holds an assistant
message the proxy itself produced in this episode (the same text and tool calls), the prompt is
built with the ids sampled for it, not with a rendering of its text: the chat template renders the
history with a marker in that message's place, the text around the markers is tokenized, and the
sampled ids go in between (less the end-of-turn token the template writes after them when the sample
already ended with it). Whatever this builds is what the policy is fed, so a recorded call is exact
by construction.

**Templates that rewrite history** (`history`). Some chat templates do not render an earlier reply as
it was sampled: a Qwen3-style template lays reasoning out its own way and drops it once a user speaks
again (`models/chat_template.REASONING_CHATML_TEMPLATE`). Per recorder, a documented choice:
`keep` (the default) feeds every reply sent back as sampled, so the episode stays one context and
the policy sees its whole history, as at sampling time; `template` feeds what the template renders
wherever that differs from the sample (found by rendering the real message and comparing), as the
model would see it deployed; the episode then starts a new context there.

**One trajectory when the calls extend each other.** When a call's prompt starts with the previous
call's prompt and completion (an append-only template, the agent sending its history back
unedited), the episode is one multi-turn trajectory: each later prompt's new tokens are an
observation (masked), each completion an action. When one does not (the agent edited or dropped
history; a template that rewrites earlier turns), the episode starts a new context there: the call's
whole prompt is fed as it is (`Turn.restart`), and the trajectory trains each context as its own
exact row, the episode still one sample of its group. Nothing is silently re-tokenized.

**Budgets** (`Limits`: the recipe's `rollout.max_turns` and `rollout.max_episode_tokens` in
training). A call past the episode's turns, or once its generated tokens are spent, is refused (HTTP
400) and the episode is truncated, as the rollout loop ends an episode at its budget. A reply that
runs past the tokens left is recorded cut there (the first tokens of a sample are distributed as
a sample capped at that many), its stop reason `length`, and the agent is refused that reply, so it
never acts on tokens that are not trained. An episode closed by its owner (its time ran out) refuses
every later call.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentic_rl.types import Task, ToolCall, Trajectory, Turn

HISTORY = ("keep", "template")
MARK = "\ue000{}\ue001"  # private-use code points: no chat template or agent writes them
_MARKS = re.compile("\ue000(\\d+)\ue001")


@dataclass(frozen=True)
class Call:
    """One chat completion the proxy answered in an episode."""

    prompt_ids: tuple[int, ...]
    ids: tuple[int, ...]  # sampled
    logprobs: tuple[float, ...]
    text: str  # the sampled ids decoded
    stop_reason: str  # eos | stop | length (the engine's)
    message: dict  # the assistant message returned to the agent (content, tool_calls)
    version: int  # the policy version that sampled it
    forced: tuple[int, ...] = ()  # fed after the prompt before sampling (a forced tool call's opening): the
    # last ids of `prompt_ids`, never trained; a reply sent back is fed as `forced + ids`


@dataclass(frozen=True)
class Limits:
    """An episode's budget: calls (`rollout.max_turns`) and generated tokens over all of them
    (`rollout.max_episode_tokens`); 0 = no limit."""

    max_turns: int = 0
    max_episode_tokens: int = 0


@dataclass
class Episode:
    id: str
    calls: list[Call] = field(default_factory=list)
    reward: float | None = None
    truncated: str = ""  # the budget that ended the episode ("" while it has not)

    @property
    def generated(self) -> int:
        return sum(len(c.ids) for c in self.calls)


def tool_call_key(calls: Sequence[dict] | None) -> tuple:
    """Tool calls compared by name and parsed arguments (agents re-serialize the JSON)."""
    out = []
    for c in calls or ():
        f = c.get("function", c)
        args = f.get("arguments", {})
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except json.JSONDecodeError:
            pass
        out.append((f.get("name"), json.dumps(args, sort_keys=True)))
    return tuple(out)


def same_message(m: dict, reply: dict) -> bool:
    """Whether the agent's assistant message `m` is the proxy's `reply` sent back unedited."""
    return ((m.get("content") or "").strip() == (reply.get("content") or "").strip()
            and tool_call_key(m.get("tool_calls")) == tool_call_key(reply.get("tool_calls")))


class Recorder:
    """Episodes by id, shared by the server's request threads."""

    def __init__(self, tokenizer, eos_ids: Sequence[int] = (), history: str = "keep", limits: Limits = Limits(),
                 end_of_turn: str = ""):
        """`end_of_turn`: the format's end-of-turn text, which ends a reply as a stop string where it is
        no token of the vocabulary (SmolLM2 in Llama's, Mistral's, Gemma's format)."""
        if history not in HISTORY:
            raise ValueError(f"history: one of {', '.join(HISTORY)} (got {history!r})")
        self.tokenizer = tokenizer
        self.eos_ids = frozenset(eos_ids)
        self.history = history
        self.limits = limits
        self.end_of_turn = end_of_turn
        self.episodes: dict[str, Episode] = {}
        self.closed: set[str] = set()  # episodes whose owner gave up on them: their calls are refused
        self.lock = threading.Lock()

    def episode(self, eid: str) -> Episode:
        with self.lock:
            return self.episodes.setdefault(eid, Episode(eid))

    def prompt_ids(self, eid: str, messages: list[dict], tools: list | None, render) -> list[int]:
        """The ids to feed the policy for `messages` in episode `eid`: the chat template's rendering
        (`render(messages, tools) -> text`), with this episode's own replies spliced in as sampled."""
        replies = list(self._admit(eid).calls)
        shown, spliced, used = list(messages), [], 0
        for i, m in enumerate(messages):
            match = next((j for j in range(used, len(replies)) if m.get("role") == "assistant"
                          and same_message(m, replies[j].message)), None)
            if match is None:
                continue
            used = match + 1
            marked = [*shown[:i], {"role": "assistant", "content": MARK.format(len(spliced))}, *shown[i + 1 :]]
            if self.history == "template" and not self._as_sampled(replies[match], render(marked, tools),
                                                                    render(shown, tools), len(spliced)):
                continue  # the template rewrites this reply: it is fed as rendered
            shown = marked
            spliced.append(replies[match])
        return self._splice(render(shown, tools), spliced)

    def _as_sampled(self, reply: Call, marked: str, real: str, k: int) -> bool:
        """Whether the template renders the reply, in this conversation, as the text it sampled
        (`marked` and `real`: the conversation rendered with the reply as marker `k` and as itself)."""
        before, _, after = marked.partition(MARK.format(k))
        ids = reply.forced + (reply.ids[:-1] if reply.ids and reply.ids[-1] in self.eos_ids else reply.ids)
        shown = real[len(before) : len(real) - len(after)] if real.startswith(before) and real.endswith(after) else None
        return shown == self.tokenizer.decode(list(ids), skip_special_tokens=False).removesuffix(self._text_end(reply))

    def _splice(self, text: str, spliced: list[Call]) -> list[int]:
        parts = _MARKS.split(text)  # text, index, text, index, ..., text
        ids = self._encode(parts[0])
        for k in range(1, len(parts), 2):
            call, after = spliced[int(parts[k])], parts[k + 1]
            ids += call.forced + call.ids
            if call.ids and call.ids[-1] in self.eos_ids:  # the template's end of turn, already sampled
                eos = self.tokenizer.decode([call.ids[-1]])
                after = after.removeprefix(eos)
            ids += self._encode(after.removeprefix(self._text_end(call)))
        return ids

    def _text_end(self, call: Call) -> str:
        """The end-of-turn text a reply ended with as a stop string (no token of the vocabulary), which
        the template writes after the reply again; "" when it ended otherwise."""
        ended = self.end_of_turn and call.ids and call.ids[-1] not in self.eos_ids
        return self.end_of_turn if ended and call.text.endswith(self.end_of_turn) else ""
    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def _admit(self, eid: str) -> Episode:
        """The episode, if it may call the model again; else the call is refused (and the budget
        that ended it recorded)."""
        if eid in self.closed:
            _refuse(410, f"episode {eid} is over: it ran past its deadline")
        ep, limits = self.episode(eid), self.limits
        if limits.max_turns and len(ep.calls) >= limits.max_turns:
            ep.truncated = ep.truncated or f"rollout.max_turns: {limits.max_turns} calls"
        elif limits.max_episode_tokens and ep.generated >= limits.max_episode_tokens:
            ep.truncated = ep.truncated or f"rollout.max_episode_tokens: {limits.max_episode_tokens} tokens"
        if ep.truncated:
            _refuse(400, f"episode {eid}: its budget is spent ({ep.truncated})")
        return ep

    def room(self, eid: str) -> int | None:
        """The tokens episode `eid` may still generate (None: no budget): a streamed reply shows no
        more, since the tokens past it are refused."""
        budget = self.limits.max_episode_tokens
        return max(budget - self.episode(eid).generated, 0) if budget else None

    def record(self, eid: str, call: Call) -> None:
        """Keep `call` in episode `eid`; one that ran past the episode's tokens is kept cut at the
        budget and its reply refused."""
        ep, budget = self.episode(eid), self.limits.max_episode_tokens
        with self.lock:  # concurrent calls of one episode share its room
            room = budget - ep.generated if budget else len(call.ids)
            if room > 0:
                ep.calls.append(self._cut(call, room))
            if len(call.ids) > room:
                ep.truncated = f"rollout.max_episode_tokens: {budget} tokens"
        if len(call.ids) > room:
            _refuse(400, f"episode {eid}: the reply ran past its budget ({ep.truncated}); "
                         f"its first {max(room, 0)} tokens are recorded")

    def _cut(self, call: Call, n: int) -> Call:
        """`call` with only its first `n` sampled tokens (all of them when it has no more)."""
        if len(call.ids) <= n:
            return call
        text = self.tokenizer.decode(list(call.ids[:n]), skip_special_tokens=False)
        return dataclasses.replace(call, ids=call.ids[:n], logprobs=call.logprobs[:n], text=text, stop_reason="length",
                                   message={"role": "assistant", "content": text})

    def set_reward(self, eid: str, reward: float) -> None:
        if eid in self.closed:
            _refuse(410, f"episode {eid} is over: it ran past its deadline")
        self.episode(eid).reward = float(reward)

    def pop(self, eid: str) -> Episode:
        with self.lock:
            return self.episodes.pop(eid, Episode(eid))

    def close(self, eid: str) -> Episode:
        """Forget episode `eid` and refuse its calls from now on (an agent still running past its
        deadline); returns what it had recorded."""
        with self.lock:
            self.closed.add(eid)
            return self.episodes.pop(eid, Episode(eid))


def _refuse(status: int, why: str):
    """The agent's call is answered with `status` (4xx: an OpenAI client does not retry it)."""
    from fastapi import HTTPException

    raise HTTPException(status, why)


def rows(calls: Sequence[Call]) -> list[list[Call]]:
    """The calls in runs where each call's prompt extends the previous prompt + completion."""
    out: list[list[Call]] = []
    seen: tuple[int, ...] = ()
    for c in calls:
        if out and c.prompt_ids[: len(seen)] == seen:
            out[-1].append(c)
        else:
            out.append([c])
        seen = c.prompt_ids + c.ids
    return out


def trajectory(episode: Episode, task: Task, reward: float = 0.0, details: Any = None) -> Trajectory | None:
    """The episode as one trajectory (one sample of its group), or None when it made no call: each
    run of extending calls is a context of its own, the first call of every later run a
    `Turn.restart` whose observation is that call's whole exact prompt."""
    turns: list[Turn] = []
    for run in rows(episode.calls):
        seen = 0
        for j, c in enumerate(run):
            turns.append(Turn(c.prompt_ids[seen:], c.ids, c.logprobs, c.text, c.stop_reason,
                              tool_calls=tuple(_calls(c.message)), restart=j == 0 and bool(turns)))
            seen = len(c.prompt_ids) + len(c.ids)
    if not turns:
        return None
    return Trajectory(task, tuple(turns), reward=reward, reward_details=dict(details or {}),
                      terminated=not episode.truncated, truncated=bool(episode.truncated))


def _calls(message: dict) -> list[ToolCall]:
    out = []
    for c in message.get("tool_calls") or ():
        try:
            out.append(ToolCall(c["function"]["name"], json.loads(c["function"]["arguments"])))
        except (KeyError, json.JSONDecodeError, TypeError):
            continue
    return out
