"""The tiny recipe runs the whole loop (baselines, SFT, GRPO, eval) through the real code path:
parameters move, metrics are finite, the run folder holds what the docs promise."""

from __future__ import annotations

import json
import math

import torch
import yaml

from agentic_rl.monitor.metrics import MACHINE_PREFIXES
from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config

REQUIRED = ["step", "stage", "reward_mean", "reward_std", "accuracy", "loss", "entropy", "kl", "clip_frac",
            "tokens_generated", "tool_calls_per_episode", "tool_error_rate", "time_rollout_s", "time_train_s",
            "time_step_s"]


def test_tiny_recipe_trains(tmp_path, snapshot):
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "rl.algorithm.kl_coef=0.05"])
    results = loop.train(cfg)

    after = snapshot["model"].state_dict()
    moved = [k for k, v in snapshot["before"].items() if not torch.equal(v, after[k])]
    assert len(moved) == len(after)  # every parameter tensor was updated (full fine-tune)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl_rows = [r for r in rows if r["stage"] == "rl"]
    assert [r["step"] for r in rl_rows] == [1, 2]
    for r in rl_rows:
        assert set(REQUIRED) <= set(r)
        assert all(math.isfinite(r[k]) for k in REQUIRED if k != "stage")
    assert all(math.isfinite(r["loss"]) for r in rows if r["stage"] == "sft")
    for stage in ("base_zero_shot", "base_few_shot", "sft", "rl"):
        assert set(results[stage]) == {"heldout_in", "heldout_out", "overall", "overall_ci"}
    split = json.loads((tmp_path / "eval.json").read_text())["rl"]["heldout_in"]
    assert split["n"] == 8
    # the per-template breakdown covers every task once and recombines to the split's accuracy
    kinds = split["accuracy_by_template"].values()
    assert sum(k["n"] for k in kinds) == 8
    # (within 1e-4: eval.json rounds each accuracy to 4 places, so each is within 5e-5 of its count / n)
    assert math.isclose(sum(k["n"] * k["accuracy"] for k in kinds) / 8, split["accuracy"], abs_tol=1e-4)
    # one failure is shown for each template with a wrong answer, and for no other
    failed = [f["template"] for f in split["failures"]]
    assert len(failed) == len(set(failed))
    assert set(failed) == {t for t, k in split["accuracy_by_template"].items() if k["accuracy"] < 1}
    assert all(f["output"] and f["reward"] < 1 for f in split["failures"])
    assert (tmp_path / "checkpoints" / "rl" / "config.json").exists()
    resolved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert resolved["rollout"]["engine"]["sync_probe_tol"] == 1e-3  # `0` resolved: the fp32 sampler's tolerance
    traj = json.loads((tmp_path / "trajectories" / "rl.jsonl").read_text().splitlines()[0])
    assert len(traj["token_ids"]) == len(traj["loss_mask"])


def test_eval_every_adds_a_learning_curve_without_changing_training(tmp_path, snapshot):
    """`eval.every` evaluates between RL steps; the training rows and the final weights equal a run
    without it (the curve is an observation, not an intervention: the evaluation puts the RNG streams
    back and leaves the weights and the sampler's state alone)."""
    base = ["eval.baselines=false", "rl.steps=3"]

    def run(name: str, extra: list[str]):
        loop.train(load_config("recipes/tiny.yaml", [*base, *extra, f"output_dir={tmp_path / name}"]))
        rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        return rows, {k: v.clone() for k, v in snapshot["model"].state_dict().items()}

    plain_rows, plain_weights = run("plain", [])
    curve_rows, curve_weights = run("curve", ["eval.every=1"])
    curve = [r for r in curve_rows if r["stage"] == "eval" and r["model"].startswith("rl-step")]
    assert [r["step"] for r in curve] == [1, 2]  # step 3 is the final evaluation, logged by train()
    assert [r["step"] for r in curve_rows if r["stage"] == "eval" and r["model"] == "rl"] == [3]
    assert all(0 <= r["accuracy_overall"] <= 1 for r in curve)

    def training(rows):
        # timings and resident memory are the machine's, not the run's
        return [{k: v for k, v in r.items() if not k.startswith(MACHINE_PREFIXES)}
                for r in rows if r["stage"] in ("sft", "rl")]

    assert training(curve_rows) == training(plain_rows)
    assert all(torch.equal(plain_weights[k], curve_weights[k]) for k in plain_weights)


def test_gradient_checkpointing_trains_the_same_step(tmp_path, snapshot):
    """`model.gradient_checkpointing` reaches the model and changes no number of the first step: the
    same episodes (same seed, same weights) give the same loss, and the weights after one update
    agree to within float noise (Adam can turn a noise-level gradient into up to lr per element)."""
    base = ["eval.baselines=false", "sft.examples=0", "rl.steps=1", "eval.tasks_per_split=1"]

    def run(name: str, extra: list[str]):
        cfg = load_config("recipes/tiny.yaml", [*base, *extra, f"output_dir={tmp_path / name}"])
        loop.train(cfg)
        rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        [step] = [r for r in rows if r["stage"] == "rl"]
        layers = snapshot["model"].get_decoder().layers
        return step, snapshot["model"].state_dict(), cfg.rl.optim.lr, all(x.gradient_checkpointing for x in layers)

    plain, plain_weights, lr, plain_ckpt = run("plain", [])
    ckpt, ckpt_weights, _, ckpt_on = run("ckpt", ["model.gradient_checkpointing=true"])
    assert ckpt_on and not plain_ckpt
    assert ckpt["tokens_generated"] == plain["tokens_generated"]  # the same episodes
    assert math.isclose(ckpt["loss"], plain["loss"], rel_tol=1e-4, abs_tol=1e-7)
    assert all(torch.allclose(plain_weights[k], ckpt_weights[k], atol=2 * lr) for k in plain_weights)


def test_the_policy_version_keeps_counting_when_lora_starts_its_rl_adapter(tmp_path):
    """With LoRA, RL trains a fresh adapter on the SFT model (a new sampler over it); the weight
    version the steps log continues from the SFT's sync instead of starting again: SFT's sync is
    version 1, RL's two steps 2 and 3."""
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "eval.baselines=false", "model.lora_rank=4"])
    loop.train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["weight_version"] for r in rows if r["stage"] == "rl"] == [2, 3]
