"""The continual pre-training stage (`cpt:`, trainer/cpt.py): what a text trains, that the stage runs
before SFT with its own optimizer and checkpoint, and that a run killed while writing any of its
states resumes to the same weights and metrics as one never interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from agentic_rl.errors import UserDataError
from agentic_rl.models.loader import load_tokenizer
from agentic_rl.monitor.metrics import MACHINE_PREFIXES
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.cpt import read_corpus, text_trajectory
from agentic_rl.trainer.loop import train

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [f"Step {k}: the agent calls calculator(expression='{k} * 7') and reads {k * 7}." for k in range(8)]


def _corpus(where: Path) -> Path:
    path = where / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    return path


def test_every_token_of_a_text_but_the_first_is_trained():
    tokenizer = load_tokenizer("tiny")
    ids = tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]
    t = text_trajectory(TEXTS[0], tokenizer, max_tokens=1024)
    assert t.token_ids() == [*ids, tokenizer.eos_token_id]  # the end marked, where packing joins texts
    assert t.loss_mask() == [0] + [1] * len(ids)
    cut = text_trajectory(TEXTS[0], tokenizer, max_tokens=5)
    assert cut.token_ids() == ids[:5] and sum(cut.loss_mask()) == 4  # cut: no end marker


def test_a_bad_corpus_line_is_named(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"text": "fine"}\n{"txt": "typo"}\n')
    with pytest.raises(UserDataError, match=r"c.jsonl:2: expected an object with a non-empty 'text'"):
        read_corpus(tmp_path / "c.jsonl")


CPT_RUN = ["sft.examples=0", "rl.steps=0", "eval.baselines=false", "eval.splits=[]", "cpt.batch_size=2",
           "cpt.pack=0", "cpt.lr=1e-3", "checkpoint.sft_every=1"]  # 8 texts, 2 a step: 4 steps, a state after each


def test_the_stage_trains_the_corpus_before_sft(tmp_path):
    corpus = _corpus(tmp_path)
    cfg = load_config(ROOT / "recipes/tiny.yaml", [*CPT_RUN, f"cpt.corpus={corpus}", "cpt.epochs=3",
                                                  "sft.examples=4", f"output_dir={tmp_path / 'run'}"])
    train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    stages = [r["stage"] for r in rows if r["stage"] in ("cpt", "sft")]
    assert stages == ["cpt"] * 12 + ["sft"]  # 3 epochs x 4 steps, then SFT's one step of 4 demonstrations
    cpt = [r["loss"] for r in rows if r["stage"] == "cpt"]
    assert cpt[-1] < cpt[0]  # the same 8 texts seen three times at lr 1e-3: the loss falls
    tokenizer = load_tokenizer("tiny")  # an epoch trains every token of every text but its first, plus its end
    per_step = [r["trained_tokens"] for r in rows if r["stage"] == "cpt"][:4]
    assert sum(per_step) == sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in TEXTS)
    assert (tmp_path / "run" / "checkpoints" / "cpt" / "model.safetensors").is_file()


def _cli(out: Path, corpus: Path, resume: bool, env: dict | None = None) -> int:
    cmd = [sys.executable, "-m", "agentic_rl.cli", "train", "recipes/tiny.yaml",
           *(a for o in [*CPT_RUN, f"cpt.corpus={corpus}", f"output_dir={out}"] for a in ("--set", o)),
           *(["--resume"] if resume else [])]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=300)  # a tiny run takes seconds: past this it hung
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr[-2000:]
    return proc.returncode


def _outcome(out: Path) -> tuple[list[dict], dict[str, torch.Tensor]]:
    rows = [{k: v for k, v in json.loads(line).items() if not k.startswith(MACHINE_PREFIXES)}
            for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows, load_file(out / "checkpoints" / "cpt" / "model.safetensors")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    where = tmp_path_factory.mktemp("cpt")
    corpus = _corpus(where)
    assert _cli(where / "ref", corpus, resume=False) == 0
    return corpus, _outcome(where / "ref")


# the states' files in order: model and optimizer after each CPT step (1-8), the stage's weights (9)
@pytest.mark.parametrize("nth", [3, *(pytest.param(n, marks=pytest.mark.slow) for n in (1, 2, 4, 5, 6, 7, 8, 9))])
def test_a_kill_while_any_state_is_written_resumes_to_the_same_run(reference, tmp_path, nth):
    corpus, (want_rows, want_weights) = reference
    out = tmp_path / "run"
    assert _cli(out, corpus, resume=False, env={"AGENTIC_RL_FAILPOINT": f"state.mid_write:{nth}"}) == -signal.SIGKILL
    assert _cli(out, corpus, resume=True) == 0
    rows, weights = _outcome(out)
    assert rows == want_rows
    assert weights.keys() == want_weights.keys() and all(torch.equal(weights[k], want_weights[k]) for k in weights)
