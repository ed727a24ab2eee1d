"""`runs/<name>/report.html`: one self-contained file (no network, no external scripts) with the run's
curves and a token-level trajectory viewer.

Curves: inline SVG of the per-step metrics, with collapse and hacking warnings and remediations drawn
as marks; the reward's own curves where the run logged them (each `reward/<name>` component, each
`hacking/<name>` rate, the verifier ladder's per-tier pass rates, calls and time).
Viewer: every logged episode token by token: masked tokens (prompt, tool results, glue) grey; sampled
tokens coloured by their advantage (green positive, red negative), with logprob and advantage on
hover; each episode's reward with its components' values; tool spans (calls and results) underlined; a marked line where the episode's context started
over (`Turn.restart`); filters by step, reward and task kind.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from agentic_rl.monitor.report_heldout import heldout_section

CURVES = ("reward_mean", "accuracy", "reward_std", "frac_zero_std_groups", "entropy", "kl", "clip_frac",
          "response_tokens_mean", "tool_calls_per_episode", "tool_error_rate", "time_step_s")
_RESTART = "new context: the history was rewritten, and the policy sees only what follows"
_OPEN = re.compile(r"<(tool_call|tool_response|search|information|code|interpreter)>")
_CLOSE = re.compile(r"</(tool_call|tool_response|search|information|code|interpreter)>")


def write_report(run_dir: str | Path, tokenizer=None, max_episodes: int = 300) -> Path:
    run_dir = Path(run_dir)
    rows = _read_jsonl(run_dir / "metrics.jsonl")
    if tokenizer is None:
        from agentic_rl.models.loader import load_tokenizer

        tokenizer = load_tokenizer("smollm2")
    episodes = _episodes(run_dir, tokenizer, max_episodes)
    plots = _plots(rows) + heldout_section(run_dir, rows)
    page = _PAGE.replace("{{TITLE}}", html.escape(run_dir.name)).replace("{{PLOTS}}", plots)
    page = page.replace("{{DATA}}", json.dumps(episodes).replace("</", "<\\/"))
    out = run_dir / "report.html"
    out.write_text(page)
    return out


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _plots(rows: list[dict]) -> str:
    rl = [r for r in rows if r.get("stage") == "rl"]
    events = [r for r in rows if r.get("stage") == "event"]
    charts = [_svg(k, [(r["step"], r[k]) for r in rl if isinstance(r.get(k), (int, float))], events)
              for k in (*CURVES, *_reward_curves(rl))]
    sft = [(r["step"], r["loss"]) for r in rows if r.get("stage") == "sft" and isinstance(r.get("loss"), (int, float))]
    charts.insert(0, _svg("sft loss", sft, [], x_label="SFT step"))
    return "".join(c for c in charts if c)


def _reward_curves(rl: list[dict]) -> list[str]:
    """The reward's own curves, where the rows hold them: each component's mean (`reward/<name>`, not
    the nested details), each hacking detector's rate, and the verifier ladder's per-tier pass rates
    and time."""
    keys = {k for r in rl for k in r}
    own = [k for k in keys if k.startswith("reward/") and k.count("/") == 1]
    ladder = [k for k in keys if (k.startswith("ladder/") and k.endswith(("/pass_rate", "/calls"))) or k == "ladder/seconds"]
    return sorted(own) + sorted(k for k in keys if k.startswith("hacking/")) + sorted(ladder)


def _svg(title: str, points: list[tuple[float, float]], events: list[dict], w: int = 300, h: int = 150,
         x_label: str = "RL step") -> str:
    """A curve of `title` (its y axis) over steps (the x axis), axes labelled, events marked."""
    if len(points) < 1:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = lambda x: 30 + (w - 40) * ((x - x0) / (x1 - x0) if x1 > x0 else 0.5)  # noqa: E731
    sy = lambda y: h - 20 - (h - 40) * ((y - y0) / (y1 - y0) if y1 > y0 else 0.5)  # noqa: E731
    line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    marks = "".join(f"<line class='event' x1='{sx(e['step']):.1f}' x2='{sx(e['step']):.1f}' y1='20' y2='{h - 20}'>"
                    f"<title>{html.escape(e.get('action', e.get('event', '')))}</title></line>"
                    for e in events if x0 <= e.get("step", -1) <= x1)
    return (f"<figure class='chart'><figcaption>{html.escape(title)}</figcaption><svg width='{w}' height='{h}' "
            f"role='img' aria-label='{html.escape(title)}'>{marks}<polyline class='curve' points='{line}'/>"
            f"<text x='2' y='16'>{y1:.3g}</text><text x='2' y='{h - 22}'>{y0:.3g}</text>"
            f"<text x='30' y='{h - 6}'>{x0:g}</text><text x='{w - 10}' y='{h - 6}' text-anchor='end'>{x1:g}</text>"
            f"<text x='{w / 2:.0f}' y='{h - 6}' text-anchor='middle'>{html.escape(x_label)}</text>"
            f"<text x='10' y='{h / 2:.0f}' transform='rotate(-90 10 {h / 2:.0f})' text-anchor='middle'>"
            f"{html.escape(title)}</text></svg></figure>")


def _episodes(run_dir: Path, tokenizer, limit: int) -> list[dict]:
    out = []
    for path in sorted((run_dir / "trajectories").glob("*.jsonl")) if (run_dir / "trajectories").exists() else []:
        for i, rec in enumerate(_read_jsonl(path)):
            if len(out) >= limit:
                return out
            out.append(_episode(rec, path.stem, i, tokenizer))
    return out


def _episode(rec: dict, source: str, index: int, tokenizer) -> dict:
    advantages = rec.get("advantages") or [0.0] * len(rec.get("token_ids", []))
    tokens, at, in_tool, tail = [], 0, False, ""
    for k, turn in enumerate(rec["turns"]):
        if k and turn.get("restart"):  # a marker, not a token: the context started over here (`Turn.restart`)
            tokens.append([_RESTART, 2, None, 0.0, 0])
        for ids, logprobs, sampled in ((turn["obs_ids"], [None] * len(turn["obs_ids"]), 0),
                                       (turn["action_ids"], turn["logprobs"], 1)):
            # the tool *instructions* in a system prompt are no tool span (a restart feeds a whole prompt)
            prompt = (k == 0 or turn.get("restart", False)) and not sampled
            for tid, lp in zip(ids, logprobs):
                text = tokenizer.decode([tid], skip_special_tokens=False)
                tail = (tail + text)[-32:]  # a tag spans several tokens: match on the recent text
                opened = None if in_tool or prompt else _OPEN.search(tail)
                if opened:
                    in_tool, tail = True, tail[opened.end():]
                adv = advantages[at] if at < len(advantages) else 0.0
                tokens.append([text, sampled, lp, round(float(adv), 4), int(in_tool)])
                if in_tool and _CLOSE.search(tail):
                    in_tool, tail = False, ""
                at += 1
    meta = rec.get("meta", {})
    step = rec.get("step")
    details = {k: round(float(v), 3) for k, v in rec.get("reward_details", {}).items() if "/" not in k}
    return {"source": source, "index": index, "step": step if step is not None else "?", "reward": rec.get("reward", 0.0),
            "details": details,
            "kind": meta.get("template") or meta.get("family") or "", "prompt": rec.get("prompt", ""),
            "answer": str(rec.get("answer")), "tokens": tokens}


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agentic-rl report: {{TITLE}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:16px;color:#222}
.charts{display:flex;flex-wrap:wrap;gap:8px}.chart{margin:0;border:1px solid #ddd;padding:4px}
.curve{fill:none;stroke:#2763c4;stroke-width:2}.event{stroke:#d33;stroke-dasharray:3 3}
svg text{font-size:10px;fill:#666}figcaption{font-size:12px;font-weight:600}
.filters{margin:12px 0;display:flex;gap:12px;align-items:center}
.episode{border:1px solid #ccc;margin:8px 0;padding:6px}.head{font-size:12px;margin-bottom:4px}
.tokens{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;line-height:1.6}
.tok.obs{color:#999;background:#f1f1f1}.tok.act{color:#000}.tok.tool{text-decoration:underline;text-decoration-color:#7a3}
.legend span{padding:1px 4px;margin-right:6px}
.restart{display:block;margin:6px 0;padding:2px 6px;border-top:2px dashed #b36b00;color:#b36b00;font-family:system-ui,sans-serif}
table.heldout{border-collapse:collapse;font-size:12px;margin:6px 0}table.heldout td,table.heldout th{border:1px solid #ddd;padding:2px 6px}
</style></head><body>
<h1>agentic-rl report: {{TITLE}}</h1>
<section class="charts">{{PLOTS}}</section>
<h2>Trajectories</h2>
<div class="legend"><span class="tok obs">masked (prompt, tool results)</span><span class="tok act" style="background:#b8e6b8">sampled, advantage &gt; 0</span><span class="tok act" style="background:#f4b6b6">sampled, advantage &lt; 0</span><span class="tok tool">tool span</span></div>
<div class="filters">step <select id="step"><option value="">all</option></select>
reward &ge; <input id="reward" type="number" step="0.1" value="">
kind <select id="kind"><option value="">all</option></select> <span id="count"></span></div>
<div id="episodes"></div>
<script id="data" type="application/json">{{DATA}}</script>
<script>
const episodes = JSON.parse(document.getElementById('data').textContent);
const $ = id => document.getElementById(id);
for (const [id, key] of [['step', 'step'], ['kind', 'kind']]) {
  for (const v of [...new Set(episodes.map(e => e[key]))].sort((a, b) => a > b ? 1 : -1))
    $(id).insertAdjacentHTML('beforeend', `<option>${v}</option>`);
}
function colour(adv) {
  const a = Math.min(Math.abs(adv), 2) / 2, alpha = (0.15 + 0.6 * a).toFixed(2);
  return adv > 0 ? `rgba(40,170,40,${alpha})` : adv < 0 ? `rgba(220,40,40,${alpha})` : 'rgba(120,120,220,0.15)';
}
function render() {
  const step = $('step').value, kind = $('kind').value, r = parseFloat($('reward').value);
  const shown = episodes.filter(e => (!step || String(e.step) === step) && (!kind || e.kind === kind) && (isNaN(r) || e.reward >= r));
  $('count').textContent = `${shown.length} of ${episodes.length} episodes`;
  $('episodes').innerHTML = '';
  for (const e of shown) {
    const div = document.createElement('div'); div.className = 'episode';
    const parts = Object.entries(e.details || {}).map(([k, v]) => `${k} ${v}`).join(', ');
    div.innerHTML = `<div class="head">step ${e.step} · ${e.kind} · reward ${e.reward}${parts ? ` (${parts})` : ''} · answer ${e.answer}</div>`;
    const toks = document.createElement('div'); toks.className = 'tokens';
    for (const [text, sampled, lp, adv, tool] of e.tokens) {
      const s = document.createElement('span');
      if (sampled === 2) { s.className = 'restart'; s.textContent = text; toks.appendChild(s); continue; }
      s.className = 'tok ' + (sampled ? 'act' : 'obs') + (tool ? ' tool' : '');
      s.textContent = text;
      if (sampled) { s.style.background = colour(adv); s.title = `logprob ${lp === null ? '' : lp.toFixed(3)} · advantage ${adv}`; }
      toks.appendChild(s);
    }
    div.appendChild(toks); $('episodes').appendChild(div);
  }
}
for (const id of ['step', 'kind', 'reward']) $(id).addEventListener('input', render);
render();
</script></body></html>
"""
