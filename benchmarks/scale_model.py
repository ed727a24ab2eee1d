"""The model of one RL step behind `scale_estimate.py`: the shapes measured and extrapolated to, the
datasheet figures and assumptions of the GPU table, the main job's per-step token counts, the fits of
each measured cost against parameter count, the predicted split of a step, and the Markdown tables.

Pure arithmetic over `scale_estimate.py`'s measurements (`--reanalyse` reruns it alone)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

from agentic_rl.engines.probe import PROBE_TOKENS

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "results" / "workers_2026-11-28" / "workers0" / "metrics.jsonl"
RECIPE = ROOT / "recipes" / "calculator.yaml"
GB = 1e9
SHORT_TOKENS = 8  # the short action the decode differences are taken against
ACT_FACTOR = 1.75  # training activations a token over memory.py's L x 34H x 2 bytes (measured at 1.7B, 2 rows)
_SMOL = dict(vocab_size=49152, tie_word_embeddings=True, rms_norm_eps=1e-5, max_position_embeddings=8192)
SIZES = {  # SmolLM2's published configs
    "135M": LlamaConfig(**_SMOL, hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                        num_key_value_heads=3, intermediate_size=1536, rope_theta=100000.0),
    "360M": LlamaConfig(**_SMOL, hidden_size=960, num_hidden_layers=32, num_attention_heads=15,
                        num_key_value_heads=5, intermediate_size=2560, rope_theta=100000.0),
    "1.7B": LlamaConfig(**_SMOL, hidden_size=2048, num_hidden_layers=24, num_attention_heads=32,
                        num_key_value_heads=32, intermediate_size=8192, rope_theta=130000.0),
}
TARGETS = {  # Qwen2.5's published shapes (GQA, 152k vocabulary; the 7B's head untied)
    "1.5B": Qwen2Config(vocab_size=151936, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                        num_key_value_heads=2, intermediate_size=8960, tie_word_embeddings=True),
    "7B": Qwen2Config(vocab_size=152064, hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                      num_key_value_heads=4, intermediate_size=18944, tie_word_embeddings=False),
}
GPU = {  # one H100 SXM: datasheet peaks, and assumed efficiencies
    "peak_bf16_flops": 989e12,  # dense bf16
    "hbm_bytes_per_s": 3.35e12,
    "train_mfu": 0.40,  # forward+backward at 6 FLOPs a parameter a token (a no-grad forward 2)
    "prefill_mfu": 0.40,  # prompt, observation and probe forwards at 2 FLOPs a parameter a token
    "decode_mfu": 0.50,  # a decode step's compute bound, 2 FLOPs a parameter a live row
    "bandwidth_eff": 0.60,  # achieved share of HBM bandwidth: decode weight + KV reads, copies, AdamW
    "decode_step_overhead_s": 0.020,  # host time of an eager HF decode step (python, launches, sampling)
    "adamw_bytes_per_param": 32,  # fused AdamW r/w of param, m, v and the grad read, + the clip's read
    "nccl_bytes_per_s": 300e9,  # the alternative: bf16 weights broadcast to a sampler on another GPU
    "hbm_gb": 80,
}
STEP = {  # both tables
    # mean share of a rollout batch's rows still decoding at a step: the run's episodes generate 79 tokens
    # on average (response_tokens_mean) and a step's longest is taken as ~200 (the budget is 256)
    "live_rows_frac": 0.4,
    "nograd_forward_share_of_fb": 1 / 3,  # a no-grad forward costs a third of a forward+backward
}


def param_counts(config) -> dict:
    """total; head (the output projection, run per sampled or trained token); body (the decoder layers,
    run per forwarded token); compute = body + head, what the per-token costs are fitted against."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    head = model.get_output_embeddings().weight.numel()
    body = total - head - (0 if config.tie_word_embeddings else model.get_input_embeddings().weight.numel())
    return {"total": total, "head": head, "body": body, "compute": body + head}


def kv_bytes_per_token(config) -> int:  # bf16 keys and values of every layer
    return 2 * config.num_hidden_layers * config.num_key_value_heads * config.hidden_size // config.num_attention_heads * 2


# ---------------------------------------------------------------- the run, the fits, the model of a step
COST_X = {"decode_s_per_token": "compute", "prefill_s_per_token": "compute", "fb_s_per_forwarded_token": "compute",
          "probe_s": "compute", "sync_copy_s": "total", "adamw_s": "total"}


def run_stats(cfg) -> dict:
    rl = [r for r in map(json.loads, RUN.read_text().splitlines()) if r.get("stage") == "rl"]
    keys = ("tokens_generated", "trained_tokens", "time_rollout_s", "time_train_s", "time_sync_s",
            "optimizer_steps", "tool_calls_per_episode", "hindsight_verified", "groups_trained")
    o, a = cfg.rl.optim, cfg.rl.algorithm  # no-grad forwards: update.py's proximal one, a KL reference's
    return {"source": str(RUN.relative_to(ROOT)), "steps": len(rl), **{k: statistics.mean(r[k] for r in rl) for k in keys},
            "nograd_forwards": {"proximal": int(o.minibatches * o.epochs > 1), "reference": int(a.kl_coef > 0)}}


def costs(w: dict) -> dict:
    d, s, u, o = w["decode"], w["sync"], w["update"], w["optimizer"]
    live = d["rows"] * STEP["live_rows_frac"]  # a decode step's fixed cost spread over the live rows
    c = {"decode_s_per_token": d["step_fixed_s"] / live + d["step_s_per_row"],
         "prefill_s_per_token": d["prefill_s_per_token"], "sync_copy_s": s["copy_s"], "probe_s": s["probe_s"]}
    c.update({"adamw_s": o["adamw_s"]} if "adamw_s" in o else {})
    for arm in ("one_group", "full"):
        if arm in u:
            c[f"{arm}_s_per_forwarded_token"] = (u[arm]["seconds"] - o["sgd_s"]) / u[arm]["forwarded_tokens"]
    c["fb_s_per_forwarded_token"] = c.get("one_group_s_per_forwarded_token", math.nan)
    return c


def fit(xs: list, ys: list) -> dict:
    """y = alpha + beta x (x: billions of parameters), alpha >= 0 (else a line through the origin); y / x at
    each point, each point's relative distance from the line, and the log-log slope."""
    if len(xs) >= 2:
        mx, my = statistics.mean(xs), statistics.mean(ys)
        beta = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        alpha = my - beta * mx
    if len(xs) < 2 or alpha < 0:
        alpha, beta = 0.0, sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    slope = statistics.linear_regression(lx, ly).slope if len(xs) >= 2 else math.nan
    return {"alpha": alpha, "beta_per_billion": beta, "x_billions": xs, "y": ys, "loglog_slope": slope,
            "y_per_billion": [y / x for x, y in zip(xs, ys)],
            "residual": [(alpha + beta * x) / y - 1 for x, y in zip(xs, ys)]}


def fits(measured: dict) -> dict:
    out = {}
    for key, x in COST_X.items():
        pts = [(w["params"][x] / 1e9, costs(w)[key]) for w in measured.values()
               if not math.isnan(costs(w).get(key, math.nan))]
        if pts:
            out[key] = {"x": x, **fit([p[0] for p in pts], [p[1] for p in pts])}
    return out


def predict(fitted: dict, params: dict) -> dict:
    return {k: f["alpha"] + f["beta_per_billion"] * params[f["x"]] / 1e9 for k, f in fitted.items()}


def split(rollout: float, update: float, sync: float, **extra) -> dict:
    total = rollout + update + sync
    return {"rollout_s": rollout, "update_s": update, "sync_s": sync, "total_s": total,
            "rollout_frac": rollout / total, "update_frac": update / total, "sync_frac": sync / total, **extra}


def step_shape(measured: dict, run: dict) -> dict:
    """What the model of a step takes besides the costs: the recipe's token counts (size-independent)."""
    w = next(iter(measured.values()))
    full = next((m["update"]["full"] for m in measured.values() if "full" in m["update"]), None)
    if full is None:
        raise SystemExit("no size ran the whole synthetic step: include 135M in --sizes")
    both = [costs(m) for m in measured.values() if {"full", "one_group"} <= set(m["update"])]
    obs = run["tool_calls_per_episode"] * w["decode"]["rows"] * w["shape"]["obs_tokens_per_call"]
    return {"rows": w["decode"]["rows"], "obs_tokens": obs, "prefill_tokens": w["decode"]["prefill_tokens"] + obs,
            "prompt_tokens": w["shape"]["prompt_tokens"], "probe_prompt_tokens": w["sync"]["probe_prompt_tokens"],
            "forwarded_per_trained": full["forwarded_tokens"] / full["trained_tokens"],
            "full_over_one_group": statistics.mean(c["full_s_per_forwarded_token"]
                                                   / c["one_group_s_per_forwarded_token"] for c in both),
            "nograd_forwards": sum(run["nograd_forwards"].values())}


def cpu_step(c: dict, run: dict, sh: dict) -> dict:
    rollout = c["prefill_s_per_token"] * sh["prefill_tokens"] + c["decode_s_per_token"] * run["tokens_generated"]
    fwd = sh["forwarded_per_trained"] * run["trained_tokens"]
    fb = c["fb_s_per_forwarded_token"] * sh["full_over_one_group"] * fwd
    update = fb * (1 + sh["nograd_forwards"] * STEP["nograd_forward_share_of_fb"]) + run["optimizer_steps"] * c["adamw_s"]
    return split(rollout, update, c["sync_copy_s"] + c["probe_s"])


def gpu_step(config, run: dict, sh: dict, g: dict = GPU) -> dict:
    p = param_counts(config)
    N, body, total = p["compute"], p["body"], p["total"]
    bw, flops, live = g["hbm_bytes_per_s"] * g["bandwidth_eff"], g["peak_bf16_flops"], sh["rows"] * STEP["live_rows_frac"]
    ctx = sh["prompt_tokens"] + (run["tokens_generated"] + sh["obs_tokens"]) / sh["rows"] / 2  # mean KV length
    t_mem = (2 * N + live * ctx * kv_bytes_per_token(config)) / bw
    t_flop = 2 * N * live / (flops * g["decode_mfu"])
    rollout = (run["tokens_generated"] / live * (max(t_mem, t_flop) + g["decode_step_overhead_s"])
               + 2 * body * sh["prefill_tokens"] / (flops * g["prefill_mfu"]))
    fwd, trained = run["trained_tokens"] * sh["forwarded_per_trained"], run["trained_tokens"]
    train_flops = (6 + 2 * sh["nograd_forwards"]) * (body * fwd + p["head"] * trained)  # logits only where trained
    update = train_flops / (flops * g["train_mfu"]) + run["optimizer_steps"] * g["adamw_bytes_per_param"] * total / bw
    probe = (PROBE_TOKENS * (2 * N / bw + g["decode_step_overhead_s"])
             + 2 * 2 * body * sh["probe_prompt_tokens"] / (flops * g["prefill_mfu"]))  # engine prefill + trainer forward
    memory = 20 * total / GB  # fp32 weights, grads, AdamW moments (16 B) + bf16 sampler copy + autocast casts
    return split(rollout, update, 6 * total / bw + probe, sync_nccl_s=2 * total / g["nccl_bytes_per_s"] + probe,
                 decode_bound="memory" if t_mem >= t_flop else "compute", memory_gb_before_activations=memory)


def analyse(measured: dict, run: dict) -> dict:
    ok = {s: w for s, w in measured.items() if "error" not in w}
    if not ok:
        raise SystemExit("no size was measured")
    fitted, sh, small = fits(ok), step_shape(ok, run), next(iter(ok))
    model_small = cpu_step({**predict(fitted, ok[small]["params"]), **costs(ok[small])}, run, sh)
    ran = split(run["time_rollout_s"], run["time_train_s"], run["time_sync_s"])
    check = {k: model_small[k] / ran[k] for k in ("rollout_s", "update_s", "sync_s", "total_s")}
    cpu = {f"{small} (the run, measured)": ran, f"{small} (model)": model_small}
    gpu = {f"{small} (ESTIMATE)": gpu_step(SIZES[small], run, sh)}
    for name, config in TARGETS.items():
        cpu[f"{name} (ESTIMATE)"] = est = cpu_step(predict(fitted, param_counts(config)), run, sh)
        cpu[f"{name} (ESTIMATE x run/model at {small})"] = split(*(est[k] / check[k] for k in list(check)[:3]))
        gpu[f"{name} (ESTIMATE)"] = gpu_step(config, run, sh)
    d = ok[small]["decode"]  # the live share at which the smallest size's decode gives the run's rollout time
    rest = (run["time_rollout_s"] - d["prefill_s_per_token"] * sh["prefill_tokens"]
            - d["step_s_per_row"] * run["tokens_generated"])
    implied = d["step_fixed_s"] * run["tokens_generated"] / (sh["rows"] * rest) if rest > 0 else math.inf
    return {"run": run, "step_shape": sh, "fits": fitted, "targets": {k: param_counts(v) for k, v in TARGETS.items()},
            "validation_model_over_run": check, "implied_live_rows_frac": implied, "cpu_table": cpu, "gpu_table": gpu}


# ---------------------------------------------------------------- output
def markdown(report: dict) -> str:
    out = ["## Measured on this CPU (random weights, our code paths)", "",
           "| size | params | sampler | decode tok/s | s/decode step | prefill ms/tok | fb ms/forwarded tok (one group; "
           "whole step) | AdamW s | copy s/GB | probe s | peak RSS GiB |", "|" + "---|" * 11]
    for s, w in report["measured"].items():
        if "error" in w:
            out.append(f"| {s} | {w['error']} |" + " |" * 9)
            continue
        c, d = costs(w), w["decode"]
        fb = "; ".join(f"{1e3 * c[k]:.3f}" if k in c else "n/a" for k in ("one_group_s_per_forwarded_token",
                                                                           "full_s_per_forwarded_token"))
        out.append(f"| {s} | {w['params']['total'] / 1e9:.3f}B | {w['sampler_dtype']} | {d['tokens_per_s']:.1f} | "
                   f"{d['s_per_step']:.3f} | {1e3 * c['prefill_s_per_token']:.3f} | {fb} | {c.get('adamw_s', math.nan):.3f} "
                   f"| {w['sync']['s_per_gb']:.3f} | {w['sync']['probe_s']:.2f} | {max(w['rss_gb'].values()):.1f} |")
    out += ["", "## Fits: cost = alpha + beta x N (N in billions of parameters)", "",
            "| cost | N | cost per billion, each size | alpha | beta | relative residuals | log-log slope |",
            "|" + "---|" * 7]
    for k, f in report["fits"].items():
        out.append(f"| {k} | {f['x']} | {', '.join(f'{v:.4g}' for v in f['y_per_billion'])} | {f['alpha']:.4g} | "
                   f"{f['beta_per_billion']:.4g} | {', '.join(f'{r:+.0%}' for r in f['residual'])} | "
                   f"{f['loglog_slope']:.2f} |")
    targets = "; ".join(f"{k}: Qwen2.5-{k} shape, {t['total'] / 1e9:.2f}B parameters ({t['compute'] / 1e9:.2f}B "
                        "compute)" for k, t in report["targets"].items())
    run, sh = report["run"], report["step_shape"]
    out += ["", f"Targets: {targets}.", "", f"A step of the run ({run['source']}, mean of {run['steps']} RL steps): "
            f"{run['tokens_generated']:.0f} tokens generated, {run['trained_tokens']:.0f} trained, "
            f"{sh['prefill_tokens']:.0f} prefilled (prompts + {sh['obs_tokens']:.0f} of observations), "
            f"{sh['forwarded_per_trained']:.2f} positions forwarded a trained token, {run['optimizer_steps']:.0f} "
            f"optimizer step(s), no-grad forwards {run['nograd_forwards']}."]
    v = report["validation_model_over_run"]
    out += ["", "Check, the model of a step at the smallest size over the run's measured step: "
            + ", ".join(f"{k} {r:.2f}x" for k, r in v.items())
            + f"; the run's rollout time would need live_rows_frac {report['implied_live_rows_frac']:.2f}"]
    out += _split_table("One RL step ON THIS CPU (the run measured; the rest the model's ESTIMATE)", report["cpu_table"])
    out += _split_table("One RL step on ONE H100 SXM: ESTIMATE from datasheet figures and the assumptions below",
                        report["gpu_table"], gpu=True)
    assumptions = {**report["assumptions"]["gpu"], **report["assumptions"]["step"]}
    return "\n".join([*out, "", "Assumptions: " + ", ".join(f"{k}={v:g}" for k, v in assumptions.items())])


def _split_table(title: str, rows: dict, gpu: bool = False) -> list:
    out = ["", f"## {title}", "", "| policy | rollout s | update s | sync s | total s | rollout | update | sync |"
           + (" sync by NCCL s | decode bound | GB before activations |" if gpu else ""),
           "|" + "---|" * (11 if gpu else 8)]
    for name, r in rows.items():
        line = (f"| {name} | {r['rollout_s']:.3g} | {r['update_s']:.3g} | {r['sync_s']:.3g} | {r['total_s']:.3g} "
                f"| {r['rollout_frac']:.0%} | {r['update_frac']:.0%} | {r['sync_frac']:.0%} |")
        if gpu:
            over = " (over one GPU)" if r["memory_gb_before_activations"] > GPU["hbm_gb"] else ""
            line += f" {r['sync_nccl_s']:.3g} | {r['decode_bound']} | {r['memory_gb_before_activations']:.0f}{over} |"
        out.append(line)
    return out
