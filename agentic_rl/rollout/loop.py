"""The agent loop: policy x env -> Trajectory, for a whole batch of episodes at once.

All episodes of a batch (or `budget.max_concurrent` at a time) decode together in one engine session
(their KV caches kept across turns);
an episode's env steps the moment its action stops, and the observation tokens it returns are fed
while the other episodes keep decoding. The loop records the exact ids it fed and the exact ids it sampled, so the
training sequence is the sampled sequence (`types.py`; tests/rollout/test_token_exactness.py).

A format whose chat template rewrites the history (`history: "template"`, e.g. `openai_reasoning`)
is checked after every turn: when its rendering of the whole conversation is not the text of what
the context holds (the sample, then the glue), the episode's context starts over from that
rendering (`Turn.restart`, an `engines.base.Restart`), as the model is prompted deployed. Every
context is exactly what was fed and sampled; the episode stays one trajectory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
import numbers
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agentic_rl.engines.base import Engine, Restart, SamplingParams
from agentic_rl.envs.base import Env, StepResult, close_env
from agentic_rl.envs.formats import bos_text
from agentic_rl.faults import InfrastructureError, Timeout, deadline
from agentic_rl.rollout.context import ContextPolicy, compacted, fit_context
from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn


@dataclass(frozen=True)
class Budget:
    """An episode's limits (the recipe's `rollout` section, `trainer/episodes.py`)."""

    max_turns: int
    max_new_tokens: int  # per turn
    max_episode_tokens: int  # generated tokens per episode, all turns
    step_timeout_s: float = 0.0  # an env step running longer ends its episode with the error; 0 = no limit
    max_concurrent: int = 0  # episodes decoded at once (each holds a KV cache); 0 = all of the batch
    context: ContextPolicy | None = None  # keep each context within a token budget (`rollout/context.py`); None: no limit


@dataclass
class EpisodeState:
    task: Task
    env: Env
    turns: list[Turn] = field(default_factory=list)
    fed: list[int] = field(default_factory=list)  # ids fed before the next action
    terminated: bool = False
    truncated: bool = False
    error: str | None = None
    infra_failure: str | None = None  # a kind of `faults.INFRA_KINDS`
    restart: bool = False  # `fed` is a whole new prompt: the next turn starts a new context
    messages: list[dict] = field(default_factory=list)  # the conversation ("template" history only)
    text: str = ""  # what the context's ids read as ("template" history only)
    env_s: float = 0.0  # seconds in the env: reset, steps, close
    prompt: list[dict] = field(default_factory=list)  # the reset's messages: system, examples, the task
    history: list[dict] = field(default_factory=list)  # the conversation after them (a context budget only)
    context_len: int = 0  # tokens the current context holds
    compacting: bool = False  # the next action is the policy's summary of its progress
    context: list[int] = field(default_factory=list)  # what the engine holds before `fed` (another round prefills it)
    rounds: int = 0  # the `advance` rounds the episode has been decoded in
    round_turns: int = 0  # its turns in the current round
    paused: bool = False  # stopped at the round's turn limit: it goes on in the next round
    span_cut: bool = False  # ended as truncated at the most rounds an episode may take
    env_steps: list[int] = field(default_factory=list)  # the turns the env stepped (not a summary): `replay`

    @property
    def generated(self) -> int:
        return sum(len(t.action_ids) for t in self.turns)


@dataclass(frozen=True)
class RolloutStats:
    seconds: float  # wall time of the rollout
    episodes: int
    generated_tokens: int
    env_seconds: float = 0.0  # time in the envs (reset, steps, close), summed over the episodes

    @staticmethod
    def total(parts: Sequence[RolloutStats], seconds: float) -> RolloutStats:
        """Parts rolled out one after the other or side by side, over `seconds` of wall time."""
        return RolloutStats(seconds, sum(p.episodes for p in parts), sum(p.generated_tokens for p in parts),
                            sum(p.env_seconds for p in parts))


def rollout(
    engine: Engine,
    make_env: Callable[[], Env],
    tasks: Sequence[Task],
    group_size: int,
    params: SamplingParams,
    budget: Budget,
    seed: int | Sequence[int] = 0,
    progress: Callable[[int], object] | None = None,
) -> tuple[list[TrajectoryGroup], RolloutStats]:
    """Run `group_size` episodes per task on `engine` (which renders and reads with its own
    `tokenizer`); returns one group per task (outcome rewards unset). `seed`: an int seeds one
    generator for the batch; one seed per episode (`episode_seeds()`, rollout.rng: episode) gives each
    episode a generator of its own, so it samples the same tokens whichever episodes share its batch,
    process or worker. `progress(n)` is told of the episodes as they end (every one, once)."""
    start = time.perf_counter()
    episodes = start_episodes(engine, make_env, tasks, group_size)
    advance(engine, episodes, params, budget, seed, Round(), progress)
    groups = [
        TrajectoryGroup(task, tuple(finish(ep) for ep in episodes[k * group_size : (k + 1) * group_size]))
        for k, task in enumerate(tasks)
    ]
    generated, env_s = sum(ep.generated for ep in episodes), sum(ep.env_s for ep in episodes)
    return groups, RolloutStats(time.perf_counter() - start, len(episodes), generated, env_s)


def start_episodes(engine: Engine, make_env: Callable[[], Env], tasks: Sequence[Task], group_size: int) -> list[EpisodeState]:
    """`group_size` episodes of each task, reset: their first observations ready to feed."""
    return [_start(task, make_env(), engine.tokenizer) for task in tasks for _ in range(group_size)]


@dataclass(frozen=True)
class Round:
    """How far one `advance` takes its episodes. The default: every episode to its end. Partial
    rollouts (`rollout/partial.py`) stop an episode after `turns` turns of the round, to go on in a
    later one (`EpisodeState.paused`), and end as truncated one in its `max_rounds`-th round that would
    go on (`EpisodeState.span_cut`); `version` is recorded on every turn sampled (`Turn.version`)."""

    turns: int = 0  # the most turns an episode takes in this round; 0: no limit
    max_rounds: int = 0  # the most rounds one episode may take; 0: no limit
    version: int | None = None


def advance(engine: Engine, episodes: Sequence[EpisodeState], params: SamplingParams, budget: Budget,
            seed: int | Sequence[int], limit: Round, progress: Callable[[int], object] | None = None) -> None:
    """Decode `episodes` together, each from where it stands (a fresh one from its prompt, a paused
    one from its whole context, prefilled), to its end or to `limit`. `seed` as for `rollout`."""
    tokenizer = engine.tokenizer
    per_episode = None if isinstance(seed, int) else list(seed)
    ended = _Ended(progress)
    for ep in episodes:
        ep.paused, ep.round_turns, ep.rounds = False, 0, ep.rounds + 1

    def on_stop(i: int, sample) -> list[int] | None:
        """The env steps as soon as this episode's action stops; the others keep decoding."""
        ep, t0 = episodes[i], time.perf_counter()
        ep.context_len += len(sample.ids)
        if ep.compacting:  # a summary: it replaces the conversation, the env never sees it
            obs_ids = compacted(ep, sample, tokenizer, budget)
        else:
            result = _step(ep.env, sample.text, budget.step_timeout_s)
            ep.env_s += time.perf_counter() - t0
            obs_ids = _observe(ep, sample, result, tokenizer, budget)
            ep.env_steps.append(len(ep.turns))
            ep.turns.append(_turn(ep, sample, result, limit.version))
            ep.round_turns += 1
            if obs_ids is not None and budget.context is not None:
                obs_ids = fit_context(ep, sample, result.observation, obs_ids, tokenizer, budget)
        if obs_ids is not None:
            ep.context = [] if isinstance(obs_ids, Restart) else [*ep.context, *ep.fed, *sample.ids]
            ep.fed, ep.restart = list(obs_ids), isinstance(obs_ids, Restart)
            ep.context_len = len(obs_ids) + (0 if ep.restart else ep.context_len)
            if limit.turns and ep.round_turns >= limit.turns and not ep.compacting:
                return _pause(ep, limit)
        else:
            ended.add(i)
        return obs_ids

    def on_error(i: int, why: str) -> None:
        """The engine could not sample this episode's next action: the machine's failure."""
        episodes[i].infra_failure, episodes[i].error = "engine", why

    room = lambda i: budget.max_episode_tokens - episodes[i].generated  # noqa: E731
    cap = budget.max_concurrent or max(len(episodes), 1)  # a data-parallel rank may have no tasks
    for lo in range(0, len(episodes), cap):  # at most `cap` episodes (and their KV caches) at once
        live = {i: [*episodes[i].context, *episodes[i].fed] for i in range(lo, min(lo + cap, len(episodes)))
                if not episodes[i].error}
        if live:
            rows = {"row_seeds": {i: per_episode[i] for i in live}} if per_episode is not None else {}
            engine.session(seed + lo if per_episode is None else 0, **rows).run(live, params, on_stop, max_new=room, on_error=on_error)
        # those the session ended without a last stop (not those paused: they go on in a later round)
        ended.add(*(i for i in range(lo, min(lo + cap, len(episodes))) if not episodes[i].paused))


def _pause(ep: EpisodeState, limit: Round) -> None:
    """The episode took the round's turns: it goes on in the next round (under the weights the
    sampler then holds), or, in its last round, ends as truncated."""
    if limit.max_rounds and ep.rounds >= limit.max_rounds:
        ep.truncated, ep.span_cut = True, True
        _close(ep)
    else:
        ep.paused = True


def _turn(ep: EpisodeState, sample, result: StepResult, version: int | None = None) -> Turn:
    """The action just sampled, what was fed before it, and what the env made of it."""
    return Turn(restart=ep.restart, obs_ids=tuple(ep.fed), action_ids=sample.ids, logprobs=sample.logprobs,
                version=version,
                action_text=sample.text, stop_reason=sample.stop_reason,
                observation="".join(m["content"] for m in result.observation), tool_calls=result.tool_calls,
                malformed_calls=result.malformed_calls, tool_errors=result.tool_errors,
                reward=result.reward or None)


class _Ended:
    """The episodes over so far, each told to `progress` once."""

    def __init__(self, progress: Callable[[int], object] | None):
        self.progress, self.seen = progress, set()

    def add(self, *episodes: int) -> None:
        new = set(episodes) - self.seen
        if new and self.progress is not None:
            self.seen |= new
            self.progress(len(new))


def episode_seeds(seed: int, positions: Sequence[int], group_size: int) -> list[int]:
    """One seed per episode of the tasks at `positions` in their step (a task's episodes in order):
    the same episode gets the same seed whichever share of the step it is rolled out in."""
    return [(seed * 1_000_003 + p) * 1_009 + j for p in positions for j in range(group_size)]


def _start(task: Task, env: Env, tokenizer) -> EpisodeState:
    """The episode's first observation; a reset that raises is tried once more, then the episode is
    the infrastructure's failure (it costs its episode, not the batch, and trains nothing)."""
    ep, t0 = EpisodeState(task, env), time.perf_counter()
    for _ in range(2):
        try:
            messages = env.reset(task)
            text = bos_text(env.format, tokenizer) + env.format.render_prompt(messages, env.tool_schemas)
            ep.fed = tokenizer.encode(text, add_special_tokens=False)
            ep.prompt, ep.context_len, ep.error = list(messages), len(ep.fed), None
            if history_of(env.format) == "template":
                ep.messages, ep.text = list(messages), text
            ep.env_s = time.perf_counter() - t0
            return ep
        except Exception as e:  # noqa: BLE001 - a broken task or env costs its episode, not the batch
            ep.error = f"reset failed: {type(e).__name__}: {e}"
    ep.infra_failure, ep.env_s = "reset", time.perf_counter() - t0
    return ep


def replay(ep: EpisodeState, make_env: Callable[[], Env], timeout_s: float = 0.0) -> bool:
    """Give a paused episode saved without its env (a state checkpoint) a new env in the state the
    old one was left in: reset on its task, then stepped with each of its actions the env saw. True
    when the env answered every one as it had (its prompt, observations, tool calls and rewards);
    False, and no env, when it did not: an env whose replies depend on more than its task and the
    actions (the clock, a service) cannot be rebuilt, and the episode must start over."""
    env = make_env()
    try:
        same = list(env.reset(ep.task)) == ep.prompt
        for turn in (ep.turns[i] for i in ep.env_steps):
            if not same:
                break
            result = _step(env, turn.action_text, timeout_s)
            same = (tuple(result.tool_calls) == tuple(turn.tool_calls) and result.tool_errors == turn.tool_errors
                    and "".join(m["content"] for m in result.observation) == turn.observation
                    and (result.reward or None) == turn.reward and not (result.terminated or result.truncated))
    except Exception:  # noqa: BLE001 - an env that cannot be rebuilt restarts its episode
        same = False
    if not same:
        close_env(env)
        return False
    ep.env = env
    return True


def _step(env: Env, action: str, timeout_s: float = 0.0) -> StepResult:
    """`env.step`, or an async env's `astep` awaited on the shared background event loop (so envs doing
    network or database I/O can be written with asyncio clients). A step that raises, hangs past
    `timeout_s` or returns something other than a StepResult truncates its episode with the error
    recorded; the other episodes of the batch go on."""
    try:
        if hasattr(env, "astep"):
            future = asyncio.run_coroutine_threadsafe(env.astep(action), _event_loop())
            try:
                result = future.result(timeout=timeout_s or None)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise Timeout(f"env.astep exceeded {timeout_s:g}s") from None
        else:
            with deadline(timeout_s, "env.step"):
                result = env.step(action)
        _check_result(result)
        return result
    except Exception as e:  # noqa: BLE001 - whatever the env does wrong costs its episode only
        kind = e.kind if isinstance(e, InfrastructureError) else "env_step"  # the env's code, not the action
        return StepResult(truncated=True, info={"error": f"env.step raised {type(e).__name__}: {e}",
                                                "infra_failure": kind})


def _check_result(result) -> None:
    """The loop reads these fields; garbage in them is the env's error, caught here, not a crash later."""
    if not isinstance(result, StepResult):
        raise TypeError(f"expected a StepResult, got {type(result).__name__}")
    if not isinstance(result.observation, (list, tuple)) or not all(
            isinstance(m, Mapping) and isinstance(m.get("content"), str) for m in result.observation):
        raise TypeError(f"observation must be a sequence of messages with string content, got {result.observation!r:.200}")
    if not isinstance(result.info, Mapping):
        raise TypeError(f"info must be a mapping, got {type(result.info).__name__}")
    if isinstance(result.reward, bool) or not isinstance(result.reward, numbers.Real) or not math.isfinite(result.reward):
        raise TypeError(f"reward must be a finite number, got {result.reward!r:.200}")


@functools.cache
def _event_loop() -> asyncio.AbstractEventLoop:
    """One event loop on a daemon thread for every async env of the process: their clients (HTTP
    sessions, connection pools) live across episodes on the loop they were made on."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="agentic-rl-env-loop", daemon=True).start()
    return loop


def _observe(ep: EpisodeState, sample, result: StepResult, tokenizer, budget: Budget) -> list[int] | None:
    """Observation ids to feed next, or None when the episode is over (and why is recorded)."""
    if result.info.get("error"):
        ep.error = result.info["error"]
    if result.info.get("infra_failure"):
        ep.infra_failure = result.info["infra_failure"]
    if result.terminated or result.truncated:
        # A final action cut by the token limit is a truncation, not an answer the model chose.
        cut = sample.stop_reason == "length"
        ep.terminated, ep.truncated = result.terminated and not cut, result.truncated or cut
        return _close(ep)
    out_of_room = ep.generated + len(sample.ids) >= budget.max_episode_tokens
    if len(ep.turns) + 1 >= budget.max_turns or out_of_room:
        ep.truncated = True
        return _close(ep)
    # the action closed its turn: at the end-of-turn token, or at its text where that is no single
    # token of the vocabulary and the engine stopped at it as a stop string (formats/families.py)
    closed = sample.stop_reason == "eos" or sample.text.endswith(ep.env.format.end_of_turn)
    glue = ep.env.format.render_observation(result.observation, action_closed=closed)
    if history_of(ep.env.format) == "template":
        return _as_rendered(ep, sample, result.observation, glue, tokenizer)
    return tokenizer.encode(glue, add_special_tokens=False)


def history_of(fmt) -> str:
    """What a format does where its rendering of the next turn does not extend the sample: "keep"
    (the default: feed the glue after what was sampled) or "template" (start over from the rendering)."""
    return getattr(fmt, "history", "keep")


def _as_rendered(ep: EpisodeState, sample, observation, glue: str, tokenizer) -> list[int] | Restart:
    """The glue when the format renders the conversation as the context's text (the sample, then the
    glue); otherwise a new context: the whole rendering, which rewrote what the policy wrote before."""
    fmt = ep.env.format
    ep.messages += [fmt.action_message(sample.text), *observation]
    ep.text += tokenizer.decode(list(sample.ids), skip_special_tokens=False) + glue
    whole = bos_text(fmt, tokenizer) + fmt.render_prompt(ep.messages, ep.env.tool_schemas)
    if whole == ep.text:
        return tokenizer.encode(glue, add_special_tokens=False)
    ep.text = whole
    return Restart(tokenizer.encode(whole, add_special_tokens=False))


def _close(ep: EpisodeState) -> None:
    """Free what the episode's env holds (a sandbox worker, a connection) as soon as it ends."""
    t0 = time.perf_counter()
    try:
        close_env(ep.env)
    except Exception as e:  # a failing cleanup is recorded, the trajectory is still good
        ep.error = ep.error or f"env.close raised {type(e).__name__}: {e}"
    ep.env_s += time.perf_counter() - t0


def finish(ep: EpisodeState) -> Trajectory:
    _close(ep)  # episodes the session ended without a final stop (and idempotent for the others)
    return Trajectory(task=ep.task, turns=tuple(ep.turns), terminated=ep.terminated, truncated=ep.truncated,
                      error=ep.error, infra_failure=ep.infra_failure)
