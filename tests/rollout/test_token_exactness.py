"""Tokens are the truth: for a multi-turn episode with tool calls, the training sequence is exactly
the sequence the engine was fed and sampled, the mask is 1 exactly on sampled tokens, and the
trainer's logprobs of that sequence equal the engine's logprobs of its samples.

The tiny random model would never write a tool call, so the sampler is scripted: it picks the
tokens of a fixed action text, while everything else (the cached forward passes, stop strings, env,
glue) is the real machinery.
"""

from __future__ import annotations

import sys

import torch

import agentic_rl.engines.hf as hf
from agentic_rl.engines.base import SamplingParams
from agentic_rl.envs.registry import get_env
from agentic_rl.models.forward import token_logprobs
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.batching import make_batch

ACTIONS = [
    'I will use the calculator.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6 * 7"}}\n</tool_call>',
    '<tool_call>\n{"name": "calculator", "arguments": {"expr": 1}}\n</tool_call>',  # a bad call: error observation
    "The answer is 42.\n<answer>42</answer><|im_end|>",
]


def _scripted_sampler(tokenizer, monkeypatch, fed: dict):
    scripts = [tokenizer.encode(a, add_special_tokens=False) for a in ACTIONS]
    state: dict[int, list[int]] = {}
    real_sample = hf._sample

    def sample(logits, params, generator):
        tokens, _ = real_sample(logits, params, generator)
        rows = logits.shape[0]
        for r in range(rows):
            queue = state.setdefault(r, [t for s in scripts for t in s])
            tokens[r] = queue.pop(0) if queue else tokenizer.eos_token_id
        logp = torch.log_softmax(logits / max(params.temperature, 1e-8), -1)
        return tokens, logp.gather(1, tokens[:, None])[:, 0]

    monkeypatch.setattr(hf, "_sample", sample)
    real_forward = hf.HFSession._forward

    def forward(self, ids, mask_new, positions, rows=None):
        names = self.rows or range(ids.shape[0])
        for i, row in enumerate(names if rows is None else [names[int(r)] for r in rows]):
            fed.setdefault(row, []).extend(int(t) for t, m in zip(ids[i], mask_new[i]) if m)
        return real_forward(self, ids, mask_new, positions, rows)

    monkeypatch.setattr(hf.HFSession, "_forward", forward)


def test_training_sequence_is_the_sampled_sequence(tiny, tokenizer, monkeypatch):
    fed: dict[int, list[int]] = {}
    _scripted_sampler(tokenizer, monkeypatch, fed)
    spec = get_env("calculator")
    task = spec.tasks("train", 1, 0)[0]
    engine = hf.HFEngine(tiny, tokenizer, precision="fp32")
    params = SamplingParams(temperature=1.0, max_new_tokens=64, stop_strings=("</tool_call>",))
    groups, _ = rollout(engine, lambda: spec.make_env({}), [task], 1, params, Budget(4, 64, 400))
    traj = groups[0].trajectories[0]

    assert [t.stop_reason for t in traj.turns] == ["stop", "stop", "eos"]
    assert traj.terminated and traj.num_tool_calls == 2 and traj.num_tool_errors == 1
    assert traj.turns[0].observation == "42" and traj.turns[1].observation.startswith("Error: unknown argument")
    # 1. The training sequence is what the model was fed, token for token (the final eos, sampled
    #    last, is never fed back: the episode is over).
    ids = traj.token_ids()
    assert fed[0] == ids[:-1]
    # 2. Mask 1 exactly on the sampled actions, 0 on prompt, tool results and glue.
    mask = traj.loss_mask()
    sampled = [t for turn in traj.turns for t in turn.action_ids]
    assert [t for t, m in zip(ids, mask) if m] == sampled
    assert tokenizer.decode([t for t, m in zip(ids, mask) if m]) == "".join(ACTIONS)
    masked_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "<tool_response>\n42\n</tool_response>" in masked_text and "What" not in tokenizer.decode(sampled)
    # 3. The trainer's logprobs of the training batch equal the engine's logprobs of its samples.
    batch = make_batch([traj], tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = token_logprobs(tiny, batch)
    m = batch.loss_mask.bool()
    assert m.sum() == len(sampled)
    torch.testing.assert_close(logp[m], batch.sampler_logprobs[m], atol=1e-4, rtol=0)




class _EchoEnv:
    """Every action gets an observation back and the episode goes on: multi-turn episodes of any
    policy, so the real sampler's cache runs across turns with observations fed between them."""

    def __init__(self):
        from agentic_rl.envs.formats import HERMES

        self.format, self.tool_schemas, self.turn = HERMES, [], 0

    def reset(self, task):
        return [{"role": "system", "content": "Echo."}, {"role": "user", "content": task.prompt}]

    def step(self, action):
        from agentic_rl.envs.base import StepResult

        self.turn += 1
        return StepResult(observation=({"role": "tool", "content": f"heard {self.turn} of {len(action)}"},))


def test_the_real_sampler_in_bf16_stores_the_trainers_logprobs_within_bf16_rounding(tiny, tokenizer):
    """No scripting: the real engine samples two groups of three three-turn episodes together, from
    its bf16 copy of the weights, with observations fed between the turns. Every stored logprob is the
    fp32 trainer's logprob of that token (a fresh plain forward of the whole sequence, no cache), within
    bf16 rounding: 0.01 nats at most on any token and 0.002 on average (measured: 0.0025 and 0.0007;
    a token off by one position would be off by nats)."""
    from agentic_rl.types import Task

    engine = hf.HFEngine(tiny, tokenizer, precision="bf16")
    tasks = [Task(str(i), f"question {i}") for i in range(2)]
    params = SamplingParams(temperature=1.0, max_new_tokens=8, stop_strings=())
    groups, _ = rollout(engine, _EchoEnv, tasks, 3, params, Budget(3, 8, 24), seed=4)
    diffs = []
    for g in groups:
        for t in g.trajectories:
            assert len(t.turns) == 3
            ids = torch.tensor([t.token_ids()])
            with torch.no_grad():
                logp = torch.log_softmax(tiny(ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])[:, 0]
            mask = torch.tensor(t.loss_mask(), dtype=torch.bool)[1:]
            stored = torch.tensor(t.sampled_logprobs())[1:]
            diffs.append((logp[mask] - stored[mask]).abs())
    d = torch.cat(diffs)
    assert d.numel() == 6 * 3 * 8 and d.max() < 0.01 and d.mean() < 0.002, (d.max(), d.mean())


def test_a_template_that_rewrites_history_starts_a_new_context_and_each_trains_as_sampled(tiny, tokenizer, monkeypatch):
    """`openai_reasoning` (a Qwen3-style template, `history: template`) renders reasoning as
    `<think>\\n...\\n</think>\\n\\n`. The first action lays it out otherwise, so the template's rendering
    of the next turn does not extend the sample: the context starts over from that rendering (the model
    sees the canonical layout, as deployed). The second action is laid out as the template renders it,
    so it extends. Then: every context is what the engine was fed, token for token; the trained
    tokens are exactly the sampled ones; and the trainer's logprobs of the one training row (two
    segments) equal the engine's. The witness: the same row without segments (the second context
    attending to the first) gives other logprobs."""
    import dataclasses

    from agentic_rl.envs.formats import OPENAI_REASONING as fmt

    call = '\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "%s"}}\n</tool_call>'
    actions = ["<think>six sevens</think>" + call % "6 * 7",
               fmt.render_assistant_body(fmt.action_message("<think>check</think>" + call % "42 / 1")),
               "<think>done</think>The answer is 42.\n<answer>42</answer><|im_end|>"]
    monkeypatch.setattr(sys.modules[__name__], "ACTIONS", actions)
    fed: dict[int, list[int]] = {}
    _scripted_sampler(tokenizer, monkeypatch, fed)
    spec = get_env("calculator")
    engine = hf.HFEngine(tiny, tokenizer, precision="fp32")
    params = SamplingParams(temperature=1.0, max_new_tokens=64, stop_strings=("</tool_call>",))
    groups, _ = rollout(engine, lambda: spec.make_env({"format": "openai_reasoning"}),
                        spec.tasks("train", 1, 0), 1, params, Budget(4, 64, 400))
    traj = groups[0].trajectories[0]

    assert traj.terminated and [t.restart for t in traj.turns] == [False, True, False]
    first, second = traj.contexts()
    prompt = tokenizer.decode(second.turns[0].obs_ids)
    assert "<think>\nsix sevens\n</think>" in prompt and "<think>six sevens" not in prompt  # as rendered
    assert prompt.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    # each context's last sampled token is never fed: its context ends (a restart) or the episode does
    assert fed[0] == first.token_ids()[:-1] + second.token_ids()[:-1]
    sampled = [t for turn in traj.turns for t in turn.action_ids]
    assert [t for t, m in zip(traj.token_ids(), traj.loss_mask()) if m] == sampled
    assert tokenizer.decode(sampled) == "".join(actions)
    batch = make_batch([traj], tokenizer.pad_token_id)
    m = batch.loss_mask.bool()
    with torch.no_grad():
        logp, _ = token_logprobs(tiny, batch)
        crossed, _ = token_logprobs(tiny, dataclasses.replace(batch, segment_ids=None))
    torch.testing.assert_close(logp[m], batch.sampler_logprobs[m], atol=1e-4, rtol=0)
    assert (crossed[m] - batch.sampler_logprobs[m]).abs().max() > 1e-2
