#!/bin/bash
# Lever (b) of issue 61, second configuration: self-distillation with privileged context, the teacher
# being the frozen SFT checkpoint (the RL start, the same start as rl-plain and the attribution runs),
# shown a worked example of another task of the same template; reverse KL (distill.loss full), coef 1;
# every group trains under the teacher. micro_batch_rows 4 only splits the forward (the same loss).
# usage: run_frozen.sh SEEDS (e.g. 2 or 2,3,4); resumable; one torch thread
cd /work/main
L=/work/corr/lever_a
for s in ${1//,/ }; do
  .venv/bin/agentic-rl seeds recipes/calculator.yaml --seeds $s --from $L/sft-plain/checkpoints/sft \
     --set eval.baselines=false --set log.progress=false --set checkpoint.keep_last=1 --set model.threads=1 \
     --set distill.privileged=similar --set distill.loss=full --set "distill.teachers=[$L/sft-plain/checkpoints/sft]" --set rl.optim.micro_batch_rows=4 \
     --set output_dir=/work/corr/lever_b/rl-frozen >> /work/corr/lever_b/rl-frozen.log 2>&1 || exit 1
done
