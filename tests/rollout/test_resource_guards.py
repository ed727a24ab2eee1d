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
