"""`agentic-rl train | sft | eval | serve | ...`: the command line. A mistake the user can fix (`UserError`:
a recipe, a file, a flag) prints one line and exits 2; anything else keeps its traceback and exits 1."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentic_rl.errors import UserError, UserFileError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentic-rl", description="Train LLM agents with RL over tool-using trajectories.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="run a recipe: baselines, SFT, RL, held-out eval")
    t.add_argument("config", help="recipe YAML, e.g. recipes/calculator.yaml")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe field, e.g. --set rl.steps=10 (repeatable)")
    t.add_argument("--resume", nargs="?", const="auto", metavar="auto|PATH",
                   help="continue a stopped run: its latest state (auto, the default) or a state directory "
                        "(runs/NAME/checkpoints/state/...); without it the run starts afresh")
    t.add_argument("--dry-run", action="store_true",
                   help="check the launch on every rank (config, process group, model, memory, Ray workers); train nothing")
    f = sub.add_parser("sft", help="SFT alone: train on demonstrations or a data file, write the graduation report")
    f.add_argument("config")
    f.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    e = sub.add_parser("eval", help="evaluate a checkpoint on the recipe's held-out splits or your own tasks")
    e.add_argument("config")
    e.add_argument("--checkpoint", required=True, help="a checkpoint directory (runs/NAME/checkpoints/...)")
    e.add_argument("--tasks", help="JSONL file, one task per line with 'prompt' and 'answer'")
    e.add_argument("--fewshot", action="store_true", help="prompt with the env's worked examples")
    e.add_argument("--out", help="where to write the eval JSON (default: the recipe's run folder, "
                                 "output_dir or runs/<name>, as eval_<checkpoint folder>.json; never into the checkpoint)")
    e.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    s = sub.add_parser("sandbox", help="run a Python file in the sandbox the agent's code runs in; prints JSON")
    s.add_argument("file")
    s.add_argument("--timeout", type=float, default=5.0, help="wall-clock seconds (default 5)")
    s.add_argument("--memory-mb", type=int, default=512,
                   help="memory limit of the execution as a whole: all its processes and files in RAM (default 512)")
    s.add_argument("--memory-guard", choices=("auto", "cgroup", "supervisor"), default="auto",
                   help="how the memory limit is held: a cgroup per execution, or a supervisor that sums and kills "
                        "(default auto: a cgroup where one can be made; docs/sandbox.md)")
    _results_parsers(sub)
    g = sub.add_parser("serve", help="an OpenAI-compatible server of a checkpoint, speaking token ids (docs/engines)")
    g.add_argument("checkpoint", help="a checkpoint directory, or smollm2 / tiny")
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=8000)
    g.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp32"))
    g.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    g.add_argument("--record", action="store_true",
                   help="also record episodes: /episodes/{id}/v1/chat/completions, their rows and rewards (docs/proxy.md)")
    g.add_argument("--history", default="keep", choices=("keep", "template"),
                   help="recorded replies sent back: as sampled (keep) or as the chat template renders them (template)")
    from agentic_rl.synth.command import add_parser as add_synth

    add_synth(sub)
    c = sub.add_parser("check-env", help="conformance checks of an env (no model needed)")
    c.add_argument("name", help="a registered env, e.g. calculator")
    c.add_argument("--option", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="an env option, as a recipe's env.options would give it (repeatable)")
    return p


def _results_parsers(sub) -> None:
    """The commands about a run's results: its report, a learning figure over seeds, and runs side by side."""
    r = sub.add_parser("report", help="write RUN_DIR/report.html: curves and the token-level trajectory viewer")
    r.add_argument("run_dir")
    v = sub.add_parser("view", help="write the report and serve it on localhost")
    v.add_argument("run_dir")
    v.add_argument("--port", type=int, default=8765)
    d = sub.add_parser("seeds", help="a recipe over several RL seeds, one after the other; their mean and interval")
    d.add_argument("config")
    d.add_argument("--seeds", required=True, help="comma-separated rl.seed values, e.g. 2,3,4")
    d.add_argument("--from", dest="start", default="", metavar="CHECKPOINT",
                   help="start every seed from this checkpoint (an SFT one), without SFT")
    d.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    m = sub.add_parser("compare", help="held-out accuracy of runs, checkpoints or seed sets side by side, "
                                       "with intervals: a table and a plot")
    m.add_argument("runs", nargs="+", help="run folders (eval.json), eval files (eval_*.json) or seeds folders (seeds.json)")
    m.add_argument("--stage", default="", help="the stage of a run folder to compare (default: its last: rl, sft, ...)")
    m.add_argument("--plot", default="", metavar="PNG", help="also draw the comparison into this PNG file")
    j = sub.add_parser("judge-agreement", help="an LLM judge's verdicts on a run's episodes against the env's "
                                               "verifier: accuracy and Cohen's kappa")
    j.add_argument("episodes", help="a run folder (its trajectories/*.jsonl) or one trajectory file")
    j.add_argument("--judge", default="smollm2", help="the judge: a model (smollm2, tiny, a local directory), "
                                                       "or the model name a --url serves")
    j.add_argument("--url", default="", help="an OpenAI-compatible server's /v1 URL to ask instead of a local model")
    j.add_argument("--rubric", default="", help="the rubric the judge grades by (default: correct and complete)")
    j.add_argument("--limit", type=int, default=64, help="episodes to grade, in file order (0 = all)")
    j.add_argument("--min-reward", type=float, default=1.0, help="a verifier reward at least this passes")
    j.add_argument("--out", default="", help="where to write the JSON (default: judge_agreement.json beside the episodes)")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"train": _train, "sft": _train, "eval": _eval, "sandbox": _sandbox, "report": _report,
               "view": _report, "check-env": _check_env, "serve": _serve, "compare": _compare,
               "seeds": _seeds, "judge-agreement": _judge_agreement, "synth": _synth}[args.command]
    return handler(args)


def _train(args) -> int:
    """`train`, or `sft`: the SFT phase alone (checkpoint, held-out eval, graduation report)."""
    from agentic_rl.engines.probe import WeightSyncError
    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.loop import train
    from agentic_rl.trainer.rl_loop import TrainingDiverged
    from agentic_rl.trainer.rl_step import InfrastructureFailure

    sft_only = ["rl.steps=0", "eval.baselines=false", "sft.graduation=true"] if args.command == "sft" else []
    try:
        cfg = load_config(args.config, [*args.overrides, *sft_only])
        if getattr(args, "dry_run", False):
            from agentic_rl.trainer.plan import dry_run

            plans = dry_run(cfg)
            if plans:
                print(json.dumps(plans, indent=2))
            return 0
        results = train(cfg, getattr(args, "resume", None))
    except UserError as e:
        return _error(e)
    except (TrainingDiverged, InfrastructureFailure, WeightSyncError) as e:
        print(f"agentic-rl: stopped: {e}", file=sys.stderr)
        return 1
    print(json.dumps(_summary(results), indent=2))
    print(f"run folder: {cfg.run_dir}")
    return 0


def _error(e: Exception) -> int:
    """A mistake the user can fix: one line, exit status 2."""
    print(f"agentic-rl: error: {e}", file=sys.stderr)
    return 2


def _check_path(path: str, flag: str) -> None:
    if not Path(path).exists():
        raise UserFileError(f"{flag}: {path} does not exist")


def _eval(args) -> int:
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.monitor.logger import readable, write_readable
    from agentic_rl.trainer.checks import check_config
    from agentic_rl.trainer.config import load_config, with_values
    from agentic_rl.trainer.distributed import World
    from agentic_rl.trainer.evaluate import evaluate, load_task_file
    from agentic_rl.trainer.loop import prepare, resolve_machine

    try:
        _check_path(args.checkpoint, "--checkpoint")
        if args.tasks:
            _check_path(args.tasks, "--tasks")
        cfg = with_values(load_config(args.config, args.overrides), {"model.name": args.checkpoint})
        check_config(cfg)
        tasks = load_task_file(args.tasks) if args.tasks else None  # a broken line fails before the model loads
    except UserError as e:
        return _error(e)
    cfg, machine = resolve_machine(cfg, World())
    print(f"agentic-rl: eval {args.checkpoint}: {machine}", flush=True)
    model, tokenizer, spec = prepare(cfg)
    result = evaluate(HFEngine(model, tokenizer, cfg.model.precision), tokenizer, spec, cfg, args.fewshot, "eval", tasks)
    out = Path(args.out) if args.out else cfg.run_dir / f"eval_{Path(args.checkpoint).resolve().name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_readable(out, result)
    print(json.dumps(readable(_summary({"eval": result})), indent=2))
    print(f"wrote {out}")
    return 0


def _report(args) -> int:
    from agentic_rl.monitor.report import write_report

    if not (Path(args.run_dir) / "metrics.jsonl").exists():
        print(f"agentic-rl: error: {args.run_dir} is not a run folder (no metrics.jsonl)", file=sys.stderr)
        return 2
    path = write_report(args.run_dir)
    print(f"wrote {path}")
    if args.command == "view":
        import functools
        import http.server

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(path.parent))
        with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as server:
            print(f"serving http://127.0.0.1:{args.port}/report.html (Ctrl-C to stop)")
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
    return 0


def _sandbox(args) -> int:
    from agentic_rl.tools.sandbox import SandboxConfig, SandboxUnavailable, run_python

    try:
        code = Path(args.file).read_text()
        config = SandboxConfig(timeout_s=args.timeout, memory_mb=args.memory_mb, memory_guard=args.memory_guard)
        result = run_python(code, config)
    except (OSError, SandboxUnavailable) as e:  # the file to run, or no sandbox on this machine
        print(f"agentic-rl: error: {e}", file=sys.stderr)
        return 2
    print(result.to_json())
    return 0


def _serve(args) -> int:
    from agentic_rl.engines.server import serve

    try:
        serve(args.checkpoint, args.host, args.port, args.precision, args.device, args.record, args.history)
    except UserError as e:
        return _error(e)
    return 0


def _seeds(args) -> int:
    from agentic_rl.monitor.seeds import SeedFailed, run_seeds
    from agentic_rl.trainer.config import load_config

    try:
        seeds = _seed_list(args.seeds)
        cfg = load_config(args.config, args.overrides)
        if args.start:
            _check_path(args.start, "--from")
        summary = run_seeds(args.config, seeds, args.overrides, cfg.run_dir, args.start)
    except UserError as e:
        return _error(e)
    except SeedFailed as e:  # a seed's own run printed why; its exit status is the command's
        print(f"agentic-rl: {'error' if e.status == 2 else 'stopped'}: {e}", file=sys.stderr)
        return 2 if e.status == 2 else 1
    for split, f in summary["accuracy"].items():
        print(f"{summary['stage']} {split}: mean {f['mean']:.3f}, 95% interval [{f['interval'][0]:.3f}, "
              f"{f['interval'][1]:.3f}], seeds {' '.join(f'{v:.3f}' for v in f['values'])}")
    print(f"wrote {cfg.run_dir / 'seeds.json'}")
    return 0


def _seed_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--seeds: expected comma-separated integers, got {text!r}") from None


def _compare(args) -> int:
    from agentic_rl.monitor import compare

    try:
        results = [compare.load(path, args.stage) for path in args.runs]
        print(compare.table(results))
        by_template = compare.template_table(results)
        if by_template:
            print("\n" + by_template)
        if args.plot:
            print(f"\nwrote {compare.plot(results, args.plot)}")
    except UserError as e:
        return _error(e)
    return 0


def _check_env(args) -> int:
    import yaml

    from agentic_rl.models.loader import load_tokenizer
    from agentic_rl.rollout.conformance import check_env

    options = {k: yaml.safe_load(v) for k, _, v in (o.partition("=") for o in args.options)}
    try:
        checks = check_env(args.name, load_tokenizer("smollm2"), options)
    except UserError as e:
        return _error(e)
    for c in checks:
        print(f"{'PASS' if c.passed else 'FAIL'}  {c.name}: {c.detail}")
    failed = sum(not c.passed for c in checks)
    print(f"{args.name}: {len(checks) - failed}/{len(checks)} checks passed")
    return 1 if failed else 0


def _summary(results: dict) -> dict:
    """Accuracy per stage and split with its 95% interval (and pass@k when sampled), without the
    samples."""
    def figure(value: float, ci) -> str:
        return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{value:.3f}"

    def split(v: dict) -> str:
        k = v.get("samples_per_task")
        return figure(v["accuracy"], v.get("accuracy_ci")) + (
            f", pass@{k} {figure(v['pass_at'][str(k)], v['pass_at_ci'][str(k)])}" if k else "")

    def stage(r: dict) -> dict:
        out = {k: split(v) for k, v in r.items() if isinstance(v, dict)}
        return {**out, "overall": figure(r["overall"], r.get("overall_ci"))} if "overall" in r else out

    return {name: stage(r) if name not in ("timing_s", "graduation") else r for name, r in results.items()}



def _judge_agreement(args) -> int:
    from agentic_rl.monitor.trajectories import read_episodes
    from agentic_rl.rewards.agreement import judge_agreement
    from agentic_rl.rewards.judge import DEFAULT_RUBRIC, EmbeddedJudge, LLMJudge, OpenAIJudge

    where = Path(args.episodes)
    try:
        episodes = read_episodes(where, args.limit)
    except UserError as e:
        return _error(e)
    if args.url:
        engine = OpenAIJudge(args.url, args.judge)
    else:
        from agentic_rl.models.loader import load_model

        engine = EmbeddedJudge(*load_model(args.judge))
    result = judge_agreement(LLMJudge(engine, args.rubric or DEFAULT_RUBRIC), episodes, args.min_reward)
    out = Path(args.out) if args.out else (where if where.is_dir() else where.parent) / "judge_agreement.json"
    out.write_text(json.dumps({"judge": args.url or args.judge, "episodes_from": str(where), **result.to_json()},
                              indent=2))
    lo, hi = result.accuracy_interval
    print(f"judge {args.judge}: accuracy {result.accuracy:.3f} [{lo:.3f}, {hi:.3f}], kappa {result.kappa:.3f} "
          f"on {result.episodes} episodes ({result.judge_failures} the judge could not grade); "
          f"verifier passes {result.verifier_pass_rate:.2f}, judge {result.judge_pass_rate:.2f}")
    print(f"wrote {out}")
    return 0


def _synth(args) -> int:
    from agentic_rl.synth.command import run

    try:
        return run(args)
    except UserError as e:
        return _error(e)


if __name__ == "__main__":
    sys.exit(main())
