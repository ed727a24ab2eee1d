"""A rollout backend of one's own: each task's group in an engine session of its own.

Used with `rollout.backend: examples/one_task_rollouts.py:OneTaskAtATime` (docs/rollouts.md). A
session then holds one group's KV caches at a time, not a whole step's: the least memory, no
batching across tasks. With `rollout.rng: episode` it samples what the built-in backend samples.
"""

from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import RolloutStats, rollout


class OneTaskAtATime:
    def __init__(self, setting):  # a trainer.rollouts.RolloutSetting
        self.engine, self.tokenizer, self.episodes = setting.engine, setting.tokenizer, setting.episodes

    def rollout(self, tasks, group_size, seed, episode_seeds=None, progress=None):
        ep, groups, parts = self.episodes, [], []
        for i, task in enumerate(tasks):
            seeds = episode_seeds[i * group_size:(i + 1) * group_size] if episode_seeds is not None else None
            out, stats = rollout(self.engine, ep.make_env, [task], group_size, ep.params, ep.budget,
                                 seed=seed + i if seeds is None else seeds, progress=progress)
            groups += score_groups(ep.reward, out, ep.budget.step_timeout_s)
            parts.append(stats)
        return groups, RolloutStats.total(parts, sum(p.seconds for p in parts))

    def sync(self, model, version, probe):
        return None  # it samples on the policy's own engine, which the trainer syncs

    def close(self):
        pass
