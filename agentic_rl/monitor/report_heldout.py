"""The report's held-out section: a table of accuracy per stage and split with 95% intervals, and a
bar chart of it (inline SVG, error bars the intervals). It reads the run's `eval.json`; a run still
going has only its metrics' eval rows, shown without intervals."""

from __future__ import annotations

import html
from pathlib import Path

from agentic_rl.monitor.compare import Figure, Result, stages

_COLOURS = {"base_zero_shot": "#9aa5b1", "base_few_shot": "#6c8ebf", "sft": "#2763c4", "rl": "#1a7f37"}
_OTHER = ("#8e44ad", "#d35400", "#16a085", "#7f8c8d")  # eval rows of a run still going, by order


def heldout_section(run_dir: Path, rows: list[dict]) -> str:
    results = stages(run_dir / "eval.json") if (run_dir / "eval.json").is_file() else _from_rows(rows)
    if not results:
        return ""
    return (f"<div class='evals'><h3>held-out accuracy (95% intervals over tasks)</h3>{_table(results)}"
            f"{_bars(results)}</div>")


def _colour(r: Result, i: int) -> str:
    return _COLOURS.get(r.label, _OTHER[i % len(_OTHER)])


def _from_rows(rows: list[dict]) -> list[Result]:
    out = []
    for r in rows:
        if r.get("stage") == "eval":
            splits = {k.removeprefix("accuracy_"): Figure(v) for k, v in r.items()
                      if k.startswith("accuracy_") and isinstance(v, (int, float))}
            out.append(Result(f"{r.get('model')} (step {r.get('step')})", splits))
    return out


def _columns(results: list[Result]) -> list[str]:
    return list(dict.fromkeys(k for r in results for k in r.splits if k != "overall")) + ["overall"]


def _table(results: list[Result]) -> str:
    cols = _columns(results)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr><td>" + html.escape(r.label) + "</td>" + "".join(
        f"<td>{html.escape(str(r.splits[c])) if c in r.splits else '—'}</td>" for c in cols) + "</tr>" for r in results)
    return f"<table class='heldout'><tr><th>stage</th>{head}</tr>{body}</table>"


def _bars(results: list[Result], w: int = 520, h: int = 200) -> str:
    """Grouped bars: one group per split and the overall figure, one bar per stage, y from 0 to 1."""
    cols = _columns(results)
    left, bottom, top = 40, 30, 12
    group = (w - left - 10) / len(cols)
    bar = group * 0.8 / len(results)
    y = lambda v: top + (h - top - bottom) * (1 - max(0.0, min(1.0, v)))  # noqa: E731
    parts = [f"<line x1='{left}' x2='{w - 10}' y1='{y(0):.1f}' y2='{y(0):.1f}' stroke='#999'/>",
             *(f"<text x='{left - 4}' y='{y(v) + 4:.1f}' text-anchor='end'>{v:g}</text>" for v in (0, 0.5, 1)),
             f"<text x='12' y='{(h - bottom) / 2:.1f}' transform='rotate(-90 12 {(h - bottom) / 2:.1f})' "
             "text-anchor='middle'>accuracy</text>"]
    for j, c in enumerate(cols):
        x0 = left + j * group + group * 0.1
        parts.append(f"<text x='{x0 + group * 0.4:.1f}' y='{h - 10}' text-anchor='middle'>{html.escape(c)}</text>")
        for i, r in enumerate(results):
            f = r.splits.get(c)
            if f is None:
                continue
            x = x0 + i * bar
            colour = _colour(r, i)
            tip = html.escape(f"{r.label} {c}: {f}")
            parts.append(f"<rect x='{x:.1f}' y='{y(f.value):.1f}' width='{bar * 0.9:.1f}' height='{y(0) - y(f.value):.1f}' "
                         f"fill='{colour}'><title>{tip}</title></rect>")
            if f.ci:
                mid = x + bar * 0.45
                parts.append(f"<line x1='{mid:.1f}' x2='{mid:.1f}' y1='{y(f.ci[1]):.1f}' y2='{y(f.ci[0]):.1f}' stroke='#222'/>")
    legend = "".join(f"<span style='background:{_colour(r, i)};color:#fff'>{html.escape(r.label)}</span>"
                     for i, r in enumerate(results))
    return (f"<figure class='chart'><figcaption>held-out accuracy by stage</figcaption><svg width='{w}' height='{h}' "
            f"role='img' aria-label='held-out accuracy by stage'>{''.join(parts)}</svg>"
            f"<div class='legend'>{legend}</div></figure>")
