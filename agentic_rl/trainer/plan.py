"""`agentic-rl train RECIPE --dry-run`: what a launch needs, checked on every rank, and nothing trained.

The recipe is checked, the process group joined (under `torchrun`) and DDP or FSDP built over the policy
(which communicates: DDP broadcasts rank 0's weights, FSDP shards them), the model loaded on its device, the
memory estimated; with `rollout.workers` the Ray pool is started, sent the weights and probed. Each
rank's plan is gathered and rank 0 returns them all. The run folder is not touched.
"""

from __future__ import annotations

from agentic_rl.engines.hf import HFEngine
from agentic_rl.models.device import device_of
from agentic_rl.trainer.checks import check_config
from agentic_rl.trainer.config import Config, with_values
from agentic_rl.trainer.distributed import DataParallel, init_world
from agentic_rl.trainer.loop import prepare
from agentic_rl.trainer.rl_loop import fit_memory, prompt_tokens, sync_probe


def dry_run(cfg: Config) -> list[dict]:
    """Every rank's plan, on rank 0 (the other ranks get nothing to print)."""
    check_config(cfg)
    world = init_world(cfg.model.device)
    model, tokenizer, spec = prepare(cfg)
    # the plan the run would make (`model.memory_plan`), reported, never refused
    memory = fit_memory(with_values(cfg, {"model.memory_check": False}), model,
                        prompt_tokens(spec, cfg.env.options, cfg.rl.seed, tokenizer))[1]
    plan = {"rank": world.rank, "world_size": world.size, "device": str(device_of(model)),
            "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
            "parallel": cfg.model.parallel if world.size > 1 else "none", "rollout_engine": cfg.rollout.engine.name,
            **memory}
    if world.size > 1:
        import torch.distributed as dist

        plan["backend"] = dist.get_backend()
    if cfg.rollout.workers.count:
        plan.update(_workers(cfg, model, tokenizer, spec))
    DataParallel(model, world, cfg.model.parallel)  # under torchrun: DDP's or FSDP's construction communicates
    plans = world.gather(plan)
    return plans if world.main else []


def _workers(cfg: Config, model, tokenizer, spec) -> dict:
    """Start the Ray pool, send it the weights, probe every worker."""
    import ray

    from agentic_rl.trainer.episodes import episodes
    from agentic_rl.trainer.workers import RolloutWorkers

    pool = RolloutWorkers(cfg, episodes(spec, cfg.env.options, cfg.rollout, reward=cfg.reward, policy=cfg.model.name))
    try:
        probe = sync_probe(HFEngine(model, tokenizer, cfg.model.precision), tokenizer, cfg)  # None: unchecked
        gap = pool.sync(model, 0, probe)
        return {"rollout_workers": len(pool.actors), "worker_pids": pool.pids(), "worker_probe_gap": gap,
                "ray_resources": ray.cluster_resources()}
    finally:
        pool.close()
