"""`agentic-rl synth webshaper | fas | has`: each writes a file a recipe reads — a task file
(webshaper: `env.options.synth_tasks` of search_r1, or the `tasks` env) or a text corpus (fas, has:
`cpt.corpus`)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import yaml

from agentic_rl.errors import UserError


def add_parser(sub) -> None:
    y = sub.add_parser("synth", help="synthesize training data: webshaper (multi-hop questions, a task file), "
                                     "fas and has (agentic text for cpt.corpus)")
    y.add_argument("kind", choices=("webshaper", "fas", "has"))
    y.add_argument("--out", required=True, help="the file to write (JSONL)")
    y.add_argument("--n", type=int, default=200, help="webshaper: questions; fas: tasks")
    y.add_argument("--seed", type=int, default=1)
    y.add_argument("--split", default="train", help="webshaper: train or heldout_multihop; fas: the env split "
                                                    "its tasks come from (default train)")
    y.add_argument("--layers", default="2,3", help="webshaper: the layers (retrievals) a question may take")
    y.add_argument("--env", default="calculator_compound", help="fas: the env whose tasks are synthesized")
    y.add_argument("--option", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="fas: an env option (repeatable)")
    y.add_argument("--source", default="demonstration", help="fas: demonstration (the env's own solutions) or "
                                                             "engine (a model writes the plans)")
    y.add_argument("--model", default="smollm2", help="fas --source engine: the model that writes")
    y.add_argument("--samples", type=int, default=2, help="fas --source engine: plans per task")
    y.add_argument("--trajectories", default="", help="has: a run folder (its trajectories/*.jsonl) or one file")


def run(args) -> int:
    start = time.perf_counter()
    kind, n = {"webshaper": _webshaper, "fas": _fas, "has": _has}[args.kind](args)
    print(f"wrote {n} {kind} to {args.out} in {time.perf_counter() - start:.1f}s")
    return 0


def write_texts(path: str | Path, texts: Sequence[str]) -> None:
    """A `cpt.corpus` file: one {"text": ...} a line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))


def _webshaper(args) -> tuple[str, int]:
    from agentic_rl.synth.files import write_tasks
    from agentic_rl.synth.webshaper import SPLITS, synthesize

    try:
        layers = [int(x) for x in args.layers.split(",")]
    except ValueError:
        raise UserError(f"--layers: expected comma-separated integers, got {args.layers!r}") from None
    if args.split not in SPLITS or min(layers) < 1:
        raise UserError(f"--split must be one of {', '.join(SPLITS)} and --layers >= 1")
    tasks = synthesize(args.n, args.seed, args.split, layers)
    write_tasks(args.out, tasks)
    counts = Counter(t.meta["layers"] for t in tasks)
    return f"questions (layers {', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))})", len(tasks)


def _fas(args) -> tuple[str, int]:
    from agentic_rl.envs.registry import get_env, resolve_env
    from agentic_rl.synth.fas import FAS_SOURCES, synthesize

    options = {}
    for item in args.options:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--option {item!r}: expected key=value")
        options[key] = yaml.safe_load(value)
    try:
        get_env(args.env)
    except KeyError as e:
        raise UserError(f"--env: {e.args[0]}") from None
    if args.source not in FAS_SOURCES:
        raise UserError(f"--source: one of {', '.join(FAS_SOURCES.names())}")
    spec = resolve_env(args.env, options)
    texts = synthesize(spec, options, args.n, args.seed, args.source, args.split, model=args.model,
                       samples=args.samples)
    write_texts(args.out, texts)
    return "planning and reasoning items", len(texts)


def _has(args) -> tuple[str, int]:
    from agentic_rl.monitor.trajectories import read_episodes
    from agentic_rl.synth.has import synthesize

    if not args.trajectories:
        raise UserError("synth has: --trajectories names a run folder or a trajectory file")
    texts = synthesize(read_episodes(Path(args.trajectories), with_errors=True), args.seed)
    write_texts(args.out, texts)
    return "contrastive decision items", len(texts)
