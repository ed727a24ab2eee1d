"""train() with LoRA, SFT then RL: the KL reference is the policy with its adapters off, which is the
SFT model; and after every update the sampler serves the merged weights of the policy being trained."""

from __future__ import annotations

import copy

import torch

from agentic_rl.models.loader import load_model
from agentic_rl.trainer import loop, rl_loop
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loss_terms import KLTerm

IDS = list(range(200, 240))


def _logprobs(model, ids=IDS) -> torch.Tensor:
    x = torch.tensor([ids])
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), -1).gather(1, x[0, 1:, None])[:, 0]


def test_lora_reference_is_the_sft_model_and_the_sampler_follows_each_update(tmp_path, monkeypatch):
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "eval.baselines=false", "model.lora_rank=4",
                                            "model.precision=bf16", "rl.algorithm.kl_coef=0.05",
                                            "rl.algorithm.entropy_coef=0.01"])  # the tiny model's rewards are all 0: this moves it
    checked = []
    real_step = rl_loop.rl_step

    def step_and_check(run, step):
        record = real_step(run, step)
        kl = next(t for t in run.loss.terms if isinstance(t, KLTerm))
        assert kl.reference is run.model and run.scorer.reference is None  # no second copy of the weights
        sft, _ = load_model(str(tmp_path / "checkpoints" / "sft"))  # saved merged before RL started
        with run.model.disable_adapter():
            torch.testing.assert_close(_logprobs(run.model), _logprobs(sft), atol=1e-5, rtol=0)
        merged = copy.deepcopy(run.model).merge_and_unload().to(torch.bfloat16).eval()
        assert torch.equal(run.engine.score(IDS), _logprobs(merged))  # synced after this step's update
        assert not torch.equal(run.engine.score(IDS), _logprobs(sft.to(torch.bfloat16)))  # and the update moved it
        checked.append((step, record.update["optimizer_steps"]))
        return record

    monkeypatch.setattr(rl_loop, "rl_step", step_and_check)
    loop.train(cfg)
    assert checked == [(1, 1), (2, 1)]
