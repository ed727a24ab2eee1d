#!/usr/bin/env bash
# The GPU path, on a machine that has one: `bash benchmarks/gpu_check.sh` (after `make install`).
#
# On the CPU machines this project is developed on, the device path is tested only through a
# stand-in device (tests/trainer/test_device.py); this script is what verifies it on hardware.
# It runs the tiny recipe end to end, then three GRPO steps of the main job (SFT, then RL) on
# cuda:0, and prints each RL step's wall time and where it went, and the held-out accuracies.
# With VLLM_PYTHON set (a Python that has vLLM, e.g. VLLM_PYTHON=.venv/bin/python after
# `pip install vllm`), the same three steps run again sampled by a managed vLLM server on the GPU
# (docs/engines/vllm.md), and the vLLM tests run against it (tests/engines/test_vllm.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/gpu_check}
"$PY" - <<'PYEOF'
import torch
assert torch.cuda.is_available(), "no CUDA device: this script checks the GPU path"
print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, bf16 {torch.cuda.is_bf16_supported()}")
PYEOF
"$PY" -m agentic_rl.cli train recipes/tiny.yaml --set model.device=cuda:0 --set output_dir="$OUT/tiny" \
  --set log.progress=false
"$PY" -m agentic_rl.cli train recipes/calculator.yaml --set model.device=cuda:0 --set rl.steps=3 \
  --set eval.tasks_per_split=50 --set output_dir="$OUT/calculator" --set log.progress=false
RUNS="tiny calculator"
if [ -n "${VLLM_PYTHON:-}" ]; then
  "$PY" -m agentic_rl.cli train recipes/calculator.yaml --set model.device=cuda:0 --set rl.steps=3 \
    --set eval.tasks_per_split=50 --set output_dir="$OUT/calculator_vllm" --set log.progress=false \
    --set rollout.engine.name=managed_vllm --set rollout.engine.vllm_python="$VLLM_PYTHON" \
    --set rollout.engine.vllm_args="--gpu-memory-utilization 0.3"
  RUNS="$RUNS calculator_vllm"
  AGENTIC_RL_VLLM_PYTHON="$VLLM_PYTHON" "$PY" -m pytest -q -m slow tests/engines/test_vllm.py
fi
"$PY" - "$OUT" $RUNS <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for run in sys.argv[2:]:
    rows = [json.loads(l) for l in (out / run / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        if r.get("stage") == "rl":
            times = {k: round(v, 2) for k, v in r.items() if k.startswith("time_")}
            print(f"{run} step {r['step']}: {times}")
    print(run, json.dumps({k: v for k, v in json.loads((out / run / "eval.json").read_text()).items()
                           if k != "timing_s"}, indent=None)[:400])
PYEOF
