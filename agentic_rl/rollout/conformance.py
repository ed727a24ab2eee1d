"""`agentic-rl check-env NAME`: what every env must do to train well, checked without a model.

Episodes run through the real rollout loop and tokenizer with a `ScriptedEngine` playing the policy,
so what passes here is what the trainer will see: seeded tasks and resets are deterministic, the
env's own demonstrations solve their tasks and re-tokenize to the exact sequence the rollout builds,
the loss mask covers exactly the sampled tokens, hostile actions become observations (never
exceptions), and turn and token budgets end episodes as truncations. For a format whose template
rewrites history (`history: template`), every turn's prompt is the template's rendering of the
conversation, and actions laid out otherwise start new contexts, each exactly what was sampled.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.base import StepResult, close_env
from agentic_rl.envs.formats import bos_text
from agentic_rl.envs.registry import resolve_env
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.loop import Budget, history_of, rollout
from agentic_rl.types import Task, Trajectory


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def check_env(name: str, tokenizer, options: Mapping[str, Any] | None = None, n: int = 8) -> list[Check]:
    options = dict(options or {})
    spec = resolve_env(name, options)
    checks = [_tasks(spec, n), _splits_disjoint(spec, 4 * n), _episodes(spec, options)]
    tasks = spec.tasks(spec.splits[0], n, 0)
    checks.append(_demonstrations(spec, options, tokenizer, tasks))
    checks.append(_rewritten_history(spec, options, tokenizer, tasks))
    checks.append(_served_round_trip(spec, options, tokenizer, tasks))
    checks.append(_bad_actions(spec, options, tasks[0]))
    checks += _budgets(spec, options, tokenizer, tasks[0])
    return checks


def _guard(name: str, fn: Callable[[], str]) -> Check:
    """A check is an assertion; anything it raises is a failure with the reason, not a crash."""
    try:
        return Check(name, True, fn())
    except Exception as e:  # noqa: BLE001 - the point is to report, whatever went wrong
        return Check(name, False, f"{type(e).__name__}: {e}")


def _tasks(spec: EnvSpec, n: int) -> Check:
    def run() -> str:
        for split in spec.splits:
            a, b, other = spec.tasks(split, n, 0), spec.tasks(split, n, 0), spec.tasks(split, n, 1)
            # a split of a file may hold fewer: then it gives every task it has, each once
            assert len(a) == n or 0 < len(a) == len(spec.tasks(split, 2 * n, 0)), \
                f"{split}: asked for {n} tasks, got {len(a)}"
            assert a == b, f"{split}: the same seed gave different tasks"
            assert len(a) < n or [t.prompt for t in a] != [t.prompt for t in other], \
                f"{split}: seeds 0 and 1 gave the same tasks"
            by_id = {t.id: t for t in a}  # a file's training split goes round again: the same task, the same id
            assert all(by_id[t.id] == t for t in a), f"{split}: two different tasks share an id"
            assert all(t.prompt and (t.answer is not None or t.meta) for t in a), \
                f"{split}: a task has no prompt or nothing to check against"
        return f"{len(spec.splits)} splits seeded and deterministic"
    return _guard("tasks are seeded", run)


def _splits_disjoint(spec: EnvSpec, n: int) -> Check:
    def run() -> str:
        train = {t.prompt for t in spec.tasks(spec.splits[0], n, 0)}
        for split in spec.splits[1:]:
            shared = train & {t.prompt for t in spec.tasks(split, n, 0)}
            assert not shared, f"{split} shares prompts with {spec.splits[0]}: {sorted(shared)[:2]}"
        return f"no held-out prompt among {n} {spec.splits[0]} prompts"
    return _guard("held-out splits are disjoint", run)


def _episodes(spec: EnvSpec, options: Mapping[str, Any]) -> Check:
    def run() -> str:
        task = spec.tasks(spec.splits[0], 1, 0)[0]
        first, second = spec.make_env(options), spec.make_env(options)
        assert first is not second, "make_env returned the same object twice: one instance per episode"
        a, b = first.reset(task), second.reset(task)
        assert a == b, "two resets on the same task gave different messages"
        assert a[-1]["role"] == "user", "reset must end with the user's turn"
        close_env(first), close_env(second)
        return "fresh instance per episode; reset deterministic"
    return _guard("one env per episode", run)


def _demonstrations(spec: EnvSpec, options, tokenizer, tasks: list[Task]) -> Check:
    """A demonstration replayed as the policy must get the observations it shows, full reward, and
    the very token sequence SFT trains on."""
    def run() -> str:
        if spec.demonstration is None:
            return "no demonstrations (skipped)"
        made = [demonstrate(spec, options, t, tokenizer) for t in tasks]
        actions = [[t.action_text for t in sft.turns] for _, sft in made]  # as the policy writes them
        trajs = _play(spec, options, tokenizer, tasks, lambda row, turn: _final(actions[row], turn, tokenizer))
        for task, (demo, sft), traj in zip(tasks, made, trajs):
            shown = [m["content"] for m in demo if m["role"] != "assistant"]  # tool results, new user turns
            got = [t.observation for t in traj.turns if t.observation]
            assert "".join(shown) == "".join(got), f"{task.id}: observations differ from the demonstration's"
            assert traj.terminated and traj.reward >= 1.0, f"{task.id}: reward {traj.reward}, not full"
            assert sft.token_ids() == traj.token_ids(), f"{task.id}: SFT and rollout token sequences differ"
            # a demonstration's untrained turns (a shown mistake) are sampled, so trained, in the replay
            shown = dataclasses.replace(traj, turns=tuple(
                dataclasses.replace(t, trained=s.trained) for t, s in zip(traj.turns, sft.turns, strict=True)))
            assert sft.loss_mask() == shown.loss_mask(), f"{task.id}: SFT and rollout masks differ"
            _assert_mask(traj)
        return f"{len(tasks)} demonstrations: reward 1, SFT sequence == rollout sequence"
    return _guard("demonstrations solve their tasks", run)


def _rewritten_history(spec: EnvSpec, options, tokenizer, tasks: list[Task]) -> Check:
    """`history: template`: the demonstrations, as the template renders them and with each action's
    reasoning laid out otherwise (`<think>note</think>` in front, which a template that rewrites
    reasoning re-renders). In every episode, each turn's prompt reads as the format renders the
    conversation so far, and the trained tokens are exactly the sampled ones."""
    def run() -> str:
        fmt = spec.make_env(options).format
        if history_of(fmt) != "template":
            return "history: keep (the glue is fed after what was sampled; skipped)"
        made = [demonstrate(spec, options, t, tokenizer) for t in tasks]
        actions = [[fmt.render_assistant_body(m) for m in d if m["role"] == "assistant"] for d, _ in made]
        restarts = 0
        for lead in ("", "<think>note</think>"):
            trajs = _play(spec, options, tokenizer, tasks, lambda row, turn, lead=lead: lead + _final(actions[row], turn, tokenizer))
            for task, traj, (_, sft) in zip(tasks, trajs, made):
                _assert_mask(traj)
                _assert_rendered(spec, options, tokenizer, task, traj)
                restarts += traj.restarts if lead else 0
                # the template's own rendering restarts only where the demonstration's does (Qwen3
                # drops an empty reasoning block from history)
                assert lead or traj.restarts == sft.restarts, f"{task.id}: the template's own rendering started a new context"
        assert restarts, "actions laid out otherwise than the template renders them never started a new context"
        return f"every turn's prompt is the template's rendering; {restarts} new contexts, each as sampled"
    return _guard("rewritten history starts exact contexts", run)


def _served_round_trip(spec: EnvSpec, options, tokenizer, tasks: list[Task]) -> Check:
    """A checkpoint trained in the format carries its chat template (`trainer.loop.speak_the_format`);
    served by our OpenAI endpoint in recording mode (`engines/server.py`), with the demonstrations'
    actions as the replies and an agent sending back what it gets plus the tool results: every call
    comes back as the `tool_calls` it was, and the recorded rows are the SFT rows, token for token
    and mask for mask. The server speaks the registered
    format with that template (`formats.format_of_template`), as a served checkpoint does: a variant
    of it (the skyrl adapter's own stop strings) must round-trip through the registered one."""
    def run() -> str:
        env = spec.make_env(options)
        fmt, tools = env.format, env.tool_schemas
        close_env(env)
        if spec.demonstration is None:
            return "no demonstrations (skipped)"
        if not getattr(fmt, "template", None):
            return f"format {fmt.name} is rendered by no chat template (skipped)"
        try:
            from starlette.testclient import TestClient
        except ImportError:
            return "the serve extra is not installed (skipped)"
        from agentic_rl.engines.recorder import Recorder
        from agentic_rl.engines.server import create_app

        trained = copy.deepcopy(tokenizer)
        trained.chat_template = fmt.template
        calls = 0
        for task in tasks:
            demo, sft = demonstrate(spec, options, task, tokenizer)
            env = spec.make_env(options)
            try:
                start = env.reset(task)
            finally:
                close_env(env)
            actions = [t.action_text for t in sft.turns]
            recorder = Recorder(trained, {tokenizer.eos_token_id}, history_of(fmt), end_of_turn=fmt.end_of_turn)
            engine = ScriptedEngine(trained, lambda row, turn, a=actions, r=recorder: a[len(r.episode("e").calls)])
            with TestClient(create_app(engine, trained, recorder=recorder)) as http:
                calls += _drive(http, [*start, *demo], tools, task)
                rows = http.get("/episodes/e").json()["rows"]
            assert [r["token_ids"] for r in rows] == [list(c.token_ids()) for c in sft.contexts()], \
                f"{task.id}: the served episode's tokens are not the SFT sequence"
            sampled = dataclasses.replace(sft, turns=tuple(dataclasses.replace(t, trained=True) for t in sft.turns))
            # a demonstration's untrained turns (a shown mistake) are sampled, so trained, when served
            assert [r["loss_mask"] for r in rows] == [list(c.loss_mask()) for c in sampled.contexts()], \
                f"{task.id}: the served episode's mask is not the SFT mask"
        return f"{len(tasks)} demonstrations served ({calls} tool calls back as tool_calls): rows == SFT rows"
    return _guard("the checkpoint's template round-trips through the server", run)


def _drive(http, demo: list[dict], tools, task: Task) -> int:
    """An OpenAI-style agent replaying `demo`: each assistant turn asked of the server, its reply sent
    back as it came, the demonstration's tool results answering its calls by id. Returns the calls."""
    messages, pending, calls = [], [], 0
    for m in demo:
        if m["role"] != "assistant":
            messages.append({**m, "tool_call_id": pending.pop(0)} if m["role"] == "tool" and pending else dict(m))
            continue
        r = http.post("/episodes/e/v1/chat/completions", json={"messages": messages, "tools": tools, "max_tokens": 8192})
        assert r.status_code == 200, f"{task.id}: the server answered {r.status_code}: {r.text[:200]}"
        reply = r.json()["choices"][0]["message"]
        got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in reply.get("tool_calls") or ()]
        want = [(c["function"]["name"], _arguments(c)) for c in m.get("tool_calls") or ()]
        assert got == want, f"{task.id}: the server parsed {got}, the demonstration called {want}"
        calls += len(got)
        pending = [c["id"] for c in reply.get("tool_calls") or ()]
        messages.append(reply)
    return calls


def _arguments(call: Mapping) -> Any:
    args = call["function"]["arguments"]
    return json.loads(args) if isinstance(args, str) else dict(args)


def _assert_rendered(spec: EnvSpec, options, tokenizer, task: Task, traj: Trajectory) -> None:
    """Each turn's prompt, read from its context's tokens, is the format's rendering of the
    conversation so far (replayed on a fresh env: resets and steps are deterministic)."""
    env = spec.make_env(options)
    fmt, context = env.format, []
    try:
        messages = env.reset(task)
        for k, turn in enumerate(traj.turns):
            context = [*([] if turn.restart else context), *turn.obs_ids]
            shown = tokenizer.decode(context, skip_special_tokens=False)
            rendered = bos_text(fmt, tokenizer) + fmt.render_prompt(messages, env.tool_schemas)
            assert shown == rendered, f"{task.id}: turn {k}'s prompt is not the rendering"
            context += turn.action_ids
            messages = [*messages, fmt.action_message(turn.action_text), *env.step(turn.action_text).observation]
    finally:
        close_env(env)


def _final(actions: list[str], turn: int, tokenizer) -> str:
    text = actions[min(turn, len(actions) - 1)]
    return text + tokenizer.eos_token if turn >= len(actions) - 1 else text


def _bad_actions(spec: EnvSpec, options, task: Task) -> Check:
    """The generic hostile actions, then the env's own (`EnvSpec.hostile_actions`: escapes from its
    files or its sandbox), each on a fresh env."""
    def run() -> str:
        fmt = spec.make_env(options).format
        own = _own_hostile(spec, options, task)
        for text in [*hostile_actions(fmt.stop_strings, seed=0), *own]:
            env = spec.make_env(options)
            env.reset(task)
            try:
                result = env.step(text)
            finally:
                close_env(env)
            assert isinstance(result, StepResult), f"step returned {type(result).__name__}"
            assert math.isfinite(result.reward), f"non-finite reward for {text[:40]!r}"
            assert all(isinstance(m["content"], str) for m in result.observation), "observation content not text"
        return (f"hostile actions ({len(own)} of the env's own) give observations or an ending, never an exception")
    return _guard("bad actions are observations", run)


def _own_hostile(spec: EnvSpec, options, task: Task) -> list[str]:
    if spec.hostile_actions is None:
        return []
    env = spec.make_env(options)
    try:
        return spec.hostile_actions(task, env)
    finally:
        close_env(env)


def hostile_actions(stop_strings: tuple[str, ...], seed: int) -> list[str]:
    rng = random.Random(seed)
    opens = [s.replace("</", "<") for s in stop_strings]
    noise = "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(300))
    out = ["", " ", "\x00", noise, "x" * 20_000, "<answer></answer>", "<answer>" + noise + "</answer>"]
    for o, c in zip(opens, stop_strings):
        out += [o, o + c, o + "{" + c, o + noise + c, o + o + "1" + c + c, c + o, o + "\x00" * 3 + c,
                o + '{"name": "no_such_tool", "arguments": {}}' + c, o + '{"name": 1}' + c]
    return out


def _budgets(spec: EnvSpec, options, tokenizer, task: Task) -> list[Check]:
    """A policy that never stops calling must be cut by the turn limit, and a verbose one by the
    token limit; both are truncations, not answers."""
    fmt = spec.make_env(options).format
    call = _a_call(spec, options, task)

    def turns() -> str:
        traj = _play(spec, options, tokenizer, [task], lambda r, t: call, Budget(3, 64, 10_000))[0]
        if spec.single_turn:
            assert len(traj.turns) == 1 and (traj.terminated or traj.truncated), f"{len(traj.turns)} turns"
            _assert_mask(traj)
            return "single-turn env: its one action ends the episode"
        assert len(traj.turns) == 3 and traj.truncated and not traj.terminated, (
            f"{len(traj.turns)} turns, truncated={traj.truncated}")
        _assert_mask(traj)
        return "3-turn budget: 3 turns, truncated"

    def tokens() -> str:
        verbose = "word " * 400 + (fmt.stop_strings[0] if fmt.stop_strings else "")
        traj = _play(spec, options, tokenizer, [task], lambda r, t: verbose, Budget(8, 32, 48))[0]
        assert traj.num_generated <= 48 and traj.truncated and not traj.terminated, (
            f"{traj.num_generated} tokens, truncated={traj.truncated}")
        return f"48-token budget: {traj.num_generated} generated, truncated"
    return [_guard("turn budget", turns), _guard("token budget", tokens)]


def _a_call(spec: EnvSpec, options, task: Task) -> str:
    """A well-formed call in the env's own protocol (its demonstration's first action) if it has one."""
    env = spec.make_env(options)
    fmt = env.format
    try:
        demo = spec.demonstration(task, env) if spec.demonstration is not None else []
    finally:
        close_env(env)
    for m in demo:
        if m["role"] == "assistant" and fmt.parse(fmt.render_assistant_body(m)).attempted:
            return fmt.render_assistant_body(m)
    if not fmt.stop_strings:  # every action is a whole reply (SkyRL's multi-turn GSM8K): one that answers nothing
        return "x" + fmt.end_of_turn
    return fmt.stop_strings[0].replace("</", "<") + "x" + fmt.stop_strings[0]


_EPISODE = Budget(40, 256, 8192)  # roomy: demonstrations must never be cut (a Sokoban solution takes up to ~20 moves)


def _play(spec: EnvSpec, options, tokenizer, tasks, script, budget: Budget = _EPISODE) -> list[Trajectory]:
    envs = []

    def make():
        envs.append(spec.make_env(options))
        return envs[-1]
    fmt = spec.make_env(options).format
    params = SamplingParams(1.0, 1.0, budget.max_new_tokens, tuple(fmt.stop_strings))
    try:
        groups, _ = rollout(ScriptedEngine(tokenizer, script), make, tasks, 1, params, budget)
    finally:
        for env in envs:
            close_env(env)
    groups = score_groups(spec.make_reward(options), groups)
    return [g.trajectories[0] for g in groups]


def _assert_mask(traj: Trajectory) -> None:
    ids, mask = traj.token_ids(), traj.loss_mask()
    sampled = [t for turn in traj.turns for t in turn.action_ids]
    assert [t for t, m in zip(ids, mask) if m] == sampled, "loss mask is not exactly the sampled tokens"
    assert traj.error is None, f"episode error: {traj.error}"
