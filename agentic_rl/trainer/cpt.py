"""Agentic continual pre-training (AgentFounder, Su et al. 2025): next-token loss on a text corpus
before SFT (`cpt:` in the recipe; docs/synth.md).

A text is a trajectory of one turn whose first token is the prompt and the rest its action, so every
token but the first is trained, and the SFT machinery (packing whole texts into rows with
block-diagonal attention, the data-parallel step, resumable steps) trains it unchanged. The stage
has its own optimizer and learning rate, logs `stage: cpt` rows, keeps a state every
`checkpoint.sft_every` steps (a resumed run continues after `progress.cpt_step`) and saves its weights
as `checkpoints/cpt`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from agentic_rl.errors import UserDataError, UserFileError
from agentic_rl.models import sharding
from agentic_rl.trainer.distributed import DataParallel
from agentic_rl.trainer.sft import sft_optimizer, sft_steps
from agentic_rl.trainer.state import SavedState
from agentic_rl.types import Task, Trajectory, Turn

if TYPE_CHECKING:
    from agentic_rl.trainer.loop import Run


def read_corpus(path: str | Path) -> list[str]:
    """The texts of a corpus file: one JSON object with a non-empty "text" a line."""
    from agentic_rl.data.task_files import read_rows

    if not Path(path).is_file():
        raise UserFileError(f"cpt.corpus: file not found: {path}")
    texts = []
    for where, row in read_rows(path):
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise UserDataError(f"{where}: expected an object with a non-empty 'text'")
        texts.append(text)
    if not texts:
        raise UserDataError(f"{path}: no texts")
    return texts


def text_trajectory(text: str, tokenizer, max_tokens: int, index: int = 0) -> Trajectory:
    """One text as a trajectory: its first token fed, every later one trained (cut at `max_tokens`)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens]
    if tokenizer.eos_token_id is not None and len(ids) < max_tokens:
        ids = [*ids, tokenizer.eos_token_id]  # where one text ends and the next may begin
    return Trajectory(Task(f"cpt-{index}", ""), (Turn(tuple(ids[:1]), tuple(ids[1:]), (0.0,) * (len(ids) - 1),
                                                      text, "eos"),))


def run_cpt(shared: Run, saved: SavedState | None = None) -> list[float]:
    """Trains on `cpt.corpus`, logs every step, returns the losses."""
    model, tokenizer, cfg = shared.model, shared.tokenizer, shared.cfg
    c, logger, store, progress = cfg.cpt, shared.logger, shared.store, shared.progress
    data = [t for k, text in enumerate(read_corpus(c.corpus))
            if len((t := text_trajectory(text, tokenizer, c.max_tokens, k)).turns[0].action_ids)]
    rows = len(data) if not c.pack else -(-sum(len(t.token_ids()) for t in data) // c.pack)  # about
    bar = tqdm(total=c.epochs * -(-rows // (c.batch_size * c.grad_accum)), initial=progress.cpt_step, desc="cpt",
               disable=not cfg.log.progress)
    parallel = DataParallel(model, strategy=cfg.model.parallel)
    optimizer = sft_optimizer(model, c.lr)
    if saved is not None and progress.cpt_step and "cpt" not in progress.stages:
        sharding.load_optimizer_state(model, optimizer, saved.load("optimizer"))
    losses, every = [], cfg.checkpoint.sft_every
    for step, metrics in sft_steps(model, data, c, tokenizer.pad_token_id, cfg.model.precision, optimizer,
                                   progress.cpt_step, parallel):
        bar.update(1)
        losses.append(metrics["loss"])
        logger.log({"step": step, "stage": "cpt", **metrics, "time_train_s": metrics["time_step_s"]})
        if every and step % every == 0:
            progress.cpt_step, progress.logger_step = step, logger.global_step
            store.save(f"cpt-step{step}", progress, model, optimizer, config=cfg)
    bar.close()
    return losses
