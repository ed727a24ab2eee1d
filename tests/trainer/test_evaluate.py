import pytest

from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.evaluate import evaluate


def test_splits_share_batches_and_each_keeps_its_own_episodes(tokenizer):
    """Two splits of 5 tasks run as batches of 4 (4 + 4 + 2, one batch holding both splits); the
    scripted model answers every in-template task right and every out-of-template task wrong, so a
    split boundary cut one task off would move both accuracies away from 1 and 0."""
    cfg = load_config("recipes/calculator.yaml", ["eval.tasks_per_split=5", "eval.batch_size=4", "log.progress=false"])
    spec = get_env(cfg.env.name)
    tasks = [t for s in cfg.eval.splits for t in spec.tasks(s, 5, cfg.eval.seed)]
    answers = [t.answer if t.meta["split"] == "heldout_in" else t.answer + 1 for t in tasks]
    started = []

    def script(row: int, turn: int) -> str:
        if turn == 0:
            started.append(row)
        return f"<answer>{answers[len(started) - 1]}</answer><|im_end|>"

    episodes = {}
    result = evaluate(ScriptedEngine(tokenizer, script), tokenizer, spec, cfg, episodes=episodes)
    assert started == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]  # three rollout batches: 4, 4 and 2 tasks
    assert (result["heldout_in"]["n"], result["heldout_out"]["n"]) == (5, 5)
    assert result["heldout_in"]["accuracy"] == 1.0 and result["heldout_out"]["accuracy"] == 0.0
    assert [g.task.id for g in episodes["heldout_in"] + episodes["heldout_out"]] == [t.id for t in tasks]


def test_k_samples_a_task_give_mean_at_k_pass_at_k_and_intervals(tokenizer):
    """4 samples of each of 6 tasks a split; the scripted model gets task i right in i of its 4
    samples, capped at 4 (0, 1, 2, 3, 4, 4 right). By hand: mean@4 = (0+1+2+3+4+4)/24 = 14/24;
    pass@1 = the mean; pass@2 per task = 1 - C(4-c, 2)/C(4, 2) = 0, 1/2, 5/6, 1, 1, 1 -> mean 26/36;
    pass@4 = 5/6 (every task with a right sample). Each figure has an interval around it, and the
    overall one spans both splits."""
    cfg = load_config("recipes/calculator.yaml", ["eval.tasks_per_split=6", "eval.samples=4", "eval.batch_size=8",
                                                  "log.progress=false"])
    spec = get_env(cfg.env.name)
    tasks = [t for s in cfg.eval.splits for t in spec.tasks(s, 6, cfg.eval.seed)]
    episodes_seen = []

    def script(row: int, turn: int) -> str:
        if turn == 0:
            episodes_seen.append(row)
        n = len(episodes_seen) - 1
        task, sample = divmod(n, 4)
        right = sample < min(task % 6, 4)
        answer = tasks[task].answer if right else tasks[task].answer + 1
        return f"<answer>{answer}</answer><|im_end|>"

    result = evaluate(ScriptedEngine(tokenizer, script), tokenizer, spec, cfg)
    for split in cfg.eval.splits:
        r = result[split]
        assert r["n"] == 6 and r["samples_per_task"] == 4
        assert r["accuracy"] == pytest.approx(14 / 24) and r["pass_at"]["1"] == pytest.approx(14 / 24)
        assert r["pass_at"]["2"] == pytest.approx(26 / 36) and r["pass_at"]["4"] == pytest.approx(5 / 6)
        lo, hi = r["accuracy_ci"]
        assert lo < 14 / 24 < hi and r["pass_at_ci"]["4"][1] == 1.0
        assert set(r["capabilities"]) >= {"format_compliance", "exploration"}
    lo, hi = result["overall_ci"]
    assert result["overall"] == pytest.approx(14 / 24) and lo < 14 / 24 < hi


def test_the_progress_bar_counts_every_episode_as_it_ends(tokenizer, monkeypatch):
    """`agentic-rl eval`'s bar is one of episodes: its total is every split's tasks x eval.samples,
    and it moves by one as each episode ends (10 tasks in batches of 4, 4 and 2 tasks: ten steps of
    one, not three of a batch), so it reaches the episode count."""
    from tqdm import tqdm

    from agentic_rl.trainer import evaluate as evaluation

    bars = []

    class Recorded(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.steps = []
            bars.append(self)

        def update(self, n=1):
            self.steps.append(n)
            return super().update(n)
    monkeypatch.setattr(evaluation, "tqdm", Recorded)
    cfg = load_config("recipes/calculator.yaml", ["eval.tasks_per_split=5", "eval.batch_size=4", "log.progress=true"])
    spec = get_env(cfg.env.name)
    evaluate(ScriptedEngine(tokenizer, lambda row, turn: "<answer>1</answer><|im_end|>"), tokenizer, spec, cfg)
    assert [(b.total, b.n, b.steps) for b in bars] == [(10, 10, [1] * 10)]
