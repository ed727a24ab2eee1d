"""The trainer: a run from its recipe to its checkpoints. Where each part lives:

- the run, top to bottom: `loop.py` (`train()`: baselines, SFT, RL, held-out evaluation);
  the recipe: `config.py` (typed, frozen), `coerce.py` (its YAML into the sections) and `checks.py`
  (what it names must exist);
- the RL stage: `rl_loop.py` (set up, then step, watch, evaluate, checkpoint), one step:
  `rl_step.py` (sample -> roll out -> score -> filter -> credit -> update -> sync -> log);
- making a step's episodes: `episodes.py` (env, reward, sampling, budgets from the recipe),
  `rollouts.py` (the rollout backend the recipe chooses: this process's engine, `workers.py` on Ray
  actors, or an agent program, `agentic_rl/rollout/agents.py`), `producer.py` (the step's tasks
  rolled out and scored through it, ahead of the update by `rl.max_staleness`);
- credit and the update: `credit.py` (rewards -> per-token advantages), `update.py` (minibatches,
  optimizer steps), `loss_terms.py` (the loss as a list of terms), `batching.py` (trajectories ->
  (B, T) rows), `critic.py` (PPO's value model), `schedule.py` (learning rate), `stats.py` (the
  update's figures);
- distillation: `teachers.py` (frozen teachers of on-policy distillation), `privileged.py` (the
  policy as its own teacher, shown a worked example);
- SFT: `sft.py`, and `graduation.py` (is the SFT model ready for RL?);
- watching: `remedies.py` (what a collapse warning does), `evaluate.py` (held-out splits);
- scale-out: `distributed.py` (torch.distributed data parallelism), `plan.py` (`--dry-run`);
- state: `state.py` (what a killed run needs to continue exactly).

The algorithm math the update calls is `agentic_rl/algorithms/`; episodes themselves are run by
`agentic_rl/rollout/`; the figures a run logs by `agentic_rl/monitor/`.
"""
