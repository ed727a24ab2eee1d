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
