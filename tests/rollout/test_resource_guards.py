"""Resource guards in the rollout: at most `max_concurrent` episodes (and KV caches) decode at once."""

from __future__ import annotations

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.loop import Budget, rollout


class _Spy(HFEngine):
    """The real engine, recording how many episodes each session decodes."""

    sizes: list[int] = []

    def session(self, seed: int = 0):
        real = super().session(seed)
        run = real.run

        def spy(prompts, *args, **kwargs):
            self.sizes.append(len(prompts))
            return run(prompts, *args, **kwargs)

        real.run = spy
        return real


def _roll(tiny, tokenizer, cap: int):
    spec = get_env("calculator")
    engine = _Spy(tiny, tokenizer, "fp32")
    engine.sizes = []
    params = SamplingParams(1.0, 1.0, 8, spec.make_env({}).format.stop_strings)
    groups, _ = rollout(engine, lambda: spec.make_env({}), spec.tasks("train", 3, 0), 4, params,
                        Budget(2, 8, 16, max_concurrent=cap), seed=5)
    return groups, engine.sizes


def test_max_concurrent_caps_the_episodes_decoded_at_once(tiny, tokenizer):
    groups, sizes = _roll(tiny, tokenizer, cap=5)
    assert sizes == [5, 5, 2]  # 3 tasks x 4 samples, five at a time
    assert [len(g.trajectories) for g in groups] == [4, 4, 4]
    assert all(t.turns for g in groups for t in g.trajectories)


def test_a_cap_above_the_batch_changes_nothing(tiny, tokenizer):
    """The first chunk keeps the rollout's seed: a cap that is never reached samples the same tokens."""
    uncapped, sizes = _roll(tiny, tokenizer, cap=0)
    capped, _ = _roll(tiny, tokenizer, cap=100)
    assert sizes == [12]
    assert [t.token_ids() for g in uncapped for t in g.trajectories] == \
        [t.token_ids() for g in capped for t in g.trajectories]


def test_the_sampler_kv_cache_stays_within_the_estimate_and_ended_rows_leave_it(tiny, tokenizer):
    """The bound the memory estimate plans with (`models/memory.py`'s sampler_kv): a session of `cap`
    episodes holds at most cap x (prompt + E + O) tokens of keys and values, times KV_SPARE (the
    buffers' spare capacity and the padding columns kept until they are a quarter of the width),
    measured after every forward of the real engine (620 KB against a bound of 3.1 MB here)."""
    from agentic_rl.engines.hf import HFSession
    from agentic_rl.models.memory import KV_SPARE, OBSERVATION_TOKENS, kv_bytes_per_token

    seen = []  # (rows, bytes) after each forward
    forward = HFSession._forward

    def spy(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        layers = self.cache.layers
        held = sum(t.nbytes for layer in layers for t in (layer._k, layer._v, layer.prefix_k, layer.prefix_v)
                   if t is not None)
        seen.append((self.mask.shape[0], held))
        return out

    HFSession._forward = spy
    try:
        spec = get_env("calculator")
        prompts = [len(tokenizer.encode(spec.make_env({}).format.render_prompt(spec.make_env({}).reset(t),
                                                                               spec.make_env({}).tool_schemas)))
                   for t in spec.tasks("train", 3, 0)]
        _, sizes = _roll(tiny, tokenizer, cap=5)
    finally:
        HFSession._forward = forward
    bound = kv_bytes_per_token(tiny.config, next(tiny.parameters()).dtype) * 5 * \
        (max(prompts) + 8 + 16 + OBSERVATION_TOKENS * (2 - 1)) * KV_SPARE
    assert sizes == [5, 5, 2] and 0 < max(b for _, b in seen) <= bound


def test_the_rows_of_ended_episodes_leave_the_cache_while_the_others_decode(tiny, tokenizer):
    """Eviction: once the episodes that ended are a quarter of a session's rows, their keys and values
    are dropped (`HFSession._compact`): two of four episodes end at their first action, the other two
    go on for three more turns in a cache of two rows."""
    engine = HFEngine(tiny, tokenizer, "fp32")
    session = engine.session(0)
    turns = {r: 0 for r in range(4)}

    def on_stop(row, sample):
        turns[row] += 1
        return None if row < 2 or turns[row] > 3 else [5, 6, 7]

    rows = []
    step = session._step
    session._step = lambda *a: rows.append(len(session.rows)) or step(*a)
    session.run({r: [1, 10 + r, 20, 30] for r in range(4)}, SamplingParams(1.0, 1.0, 4), on_stop)
    assert rows[0] == 4 and rows[-1] == 2 and turns == {0: 1, 1: 1, 2: 4, 3: 4}
    assert session.cache.layers[0]._k.shape[0] == 2
