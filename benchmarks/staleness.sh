#!/bin/bash
# rl.max_staleness k = 0, 1, 2 on the main job (docs/async.md#measured):
#  - step time with vLLM as the sampler: 5 RL steps at each k (needs VLLM_PYTHON, e.g. .venv-vllm/bin/python);
#  - held-out accuracy after the recipe's 20 RL steps at each k, rl.seed 2/3/4, embedded sampler.
# Every run starts from the same SFT checkpoint. Usage: benchmarks/staleness.sh SFT_CHECKPOINT OUT [VLLM_PYTHON]
# then: python benchmarks/staleness_table.py OUT
set -e
SFT=$1; OUT=$2; VLLM_PYTHON=$3
cd "$(dirname "$0")/.."
run() {  # name seed k extra-args...
  n=$1; s=$2; k=$3; shift 3
  [ -f "$OUT/$n/eval.json" ] && return
  .venv/bin/agentic-rl train recipes/calculator.yaml --set model.name="$SFT" --set sft.examples=0 \
    --set eval.baselines=false --set rl.seed="$s" --set rl.max_staleness="$k" --set output_dir="$OUT/$n" \
    --set log.progress=false "$@" > "$OUT/$n.log" 2>&1
}
mkdir -p "$OUT"
if [ -n "$VLLM_PYTHON" ]; then
  for k in 0 1 2; do
    run vllm-k$k-time 4 $k --set rollout.engine.name=managed_vllm --set rollout.engine.vllm_python="$VLLM_PYTHON" \
      --set rl.steps=5 --set eval.tasks_per_split=1
  done
fi
for k in 0 1 2; do for s in 2 3 4; do run k$k-seed$s $s $k; done; done
