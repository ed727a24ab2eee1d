#!/bin/bash
# The figure that counts (issue 61): every arm's final checkpoint on heldout_fresh, once, at the end.
# usage: run.sh ARM_LIST_FILE   (lines: "arm seed checkpoint"); one torch thread; skips what is done
cd /work/main
while read -r arm seed ckpt; do
  out=/work/corr/fresh/$arm/seed$seed.json
  [ -f "$out" ] && continue
  mkdir -p /work/corr/fresh/$arm
  .venv/bin/agentic-rl eval recipes/calculator.yaml --checkpoint "$ckpt" --out "$out" \
     --set 'eval.splits=[heldout_fresh]' --set eval.tasks_per_split=100 --set model.threads=1 \
     --set log.progress=false >> /work/corr/fresh/$arm.log 2>&1 || echo "FAILED $arm $seed" >> /work/corr/fresh/failed
done < "$1"
