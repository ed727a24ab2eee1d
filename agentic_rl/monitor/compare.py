"""`agentic-rl compare RUN ...`: which run won, with the intervals that say whether it did.

Each argument is a run folder (its `eval.json`; the last evaluated stage, or `--stage`), an eval file
(`agentic-rl eval`'s `eval_<checkpoint>.json`), or a seeds folder (`agentic-rl seeds`, its
`seeds.json`: the mean over seeds with the seeds' t-interval; per template, the same over the seeds'
own `eval.json`). The table has held-out accuracy per
split with its 95% interval; a second table breaks it down by task template; the plot (PNG) shows
both splits and the overall figure, one bar per run, the interval as its error bar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from agentic_rl.errors import UserFileError
from agentic_rl.monitor.intervals import ACCURACY, bootstrap_ci, mean_of_means_ci, seed_interval

STAGES = ("rl", "sft", "base_few_shot", "base_zero_shot")  # the last evaluated first


@dataclass(frozen=True)
class Figure:
    value: float
    ci: tuple[float, float] | None = None

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.ci[0]:.3f}, {self.ci[1]:.3f}]" if self.ci else f"{self.value:.3f}"


@dataclass(frozen=True)
class Result:
    label: str
    splits: dict[str, Figure]  # the splits' accuracies, then "overall"
    templates: dict[str, dict[str, Figure]] = field(default_factory=dict)  # split -> template -> accuracy
    note: str = ""  # e.g. "3 seeds"


def load(path: str | Path, stage: str = "") -> Result:
    """A run folder, an eval file or a seeds folder, read as one `Result`."""
    path = Path(path)
    if (path / "seeds.json").is_file():
        return _seeds(path)
    file = path / "eval.json" if path.is_dir() else path
    if not file.is_file():
        raise UserFileError(f"{path}: no eval.json, eval file or seeds.json here")
    data = json.loads(file.read_text())
    if "overall" in data:  # `agentic-rl eval`'s file: one evaluation
        return _evaluation(str(path), data)
    chosen = stage or next((s for s in STAGES if s in data), "")
    if chosen not in data:
        raise KeyError(f"{file}: no stage {chosen or 'evaluated'!r} (has {', '.join(k for k in data if k in STAGES)})")
    return _evaluation(f"{path.name} ({chosen})", data[chosen])


def stages(path: str | Path) -> list[Result]:
    """Every evaluated stage of a run's `eval.json`, in training order (the base model first)."""
    data = json.loads(Path(path).read_text())
    return [_evaluation(s, data[s]) for s in reversed(STAGES) if s in data]


def _evaluation(label: str, r: dict) -> Result:
    """An evaluation's figures; an eval file written before intervals were (one greedy episode a task)
    gets them from its counts, as the evaluation would have computed them."""
    parts = {k: v for k, v in r.items() if isinstance(v, dict)}
    splits = {k: Figure(v["accuracy"], _ci(v.get("accuracy_ci")) or _from_counts(v)) for k, v in parts.items()}
    templates = {k: {t: Figure(x["accuracy"], _ci(x.get("ci")) or _from_counts(x, v))
                     for t, x in v.get("accuracy_by_template", {}).items()} for k, v in parts.items()}
    overall = _ci(r.get("overall_ci")) or (mean_of_means_ci([_outcomes(v) for v in parts.values()])
                                           if all(_outcomes(v) for v in parts.values()) else None)
    return Result(label, {**splits, "overall": Figure(r["overall"], overall)}, templates)


def _outcomes(v: dict, split: dict | None = None) -> list[float]:
    """The 0/1 outcomes behind an accuracy over `n` greedy episodes (none when sampled k > 1)."""
    if "n" not in v or (split or v).get("samples_per_task", 1) != 1:
        return []
    right = round(v["accuracy"] * v["n"])
    return [1.0] * right + [0.0] * (v["n"] - right)


def _from_counts(v: dict, split: dict | None = None) -> tuple[float, float] | None:
    outcomes = _outcomes(v, split)
    return bootstrap_ci(outcomes) if outcomes else None


def _seeds(path: Path) -> Result:
    data = json.loads((path / "seeds.json").read_text())
    splits = {k: Figure(v["mean"], _ci(v["interval"])) for k, v in data["accuracy"].items()}
    n = len(data["seeds"])
    label = f"{path.name} (mean of {n} seeds)" if n > 1 else f"{path.name} (1 seed, no seed interval)"
    return Result(label, splits, _seed_templates(path, data["seeds"], data["stage"]), note=f"seeds {data['seeds']}")


def _seed_templates(path: Path, seeds: list[int], stage: str) -> dict[str, dict[str, Figure]]:
    """Per split and template, the mean over the seeds with their t-interval, from each seed's
    `eval.json` (a seed folder without one is left out)."""
    per: dict[tuple[str, str], list[float]] = {}
    for seed in seeds:
        file = path / f"seed{seed}" / "eval.json"
        parts = json.loads(file.read_text()).get(stage, {}) if file.is_file() else {}
        for split, v in parts.items():
            for template, x in (v.get("accuracy_by_template", {}) if isinstance(v, dict) else {}).items():
                per.setdefault((split, template), []).append(x["accuracy"])
    out: dict[str, dict[str, Figure]] = {}
    for (split, template), xs in sorted(per.items()):
        out.setdefault(split, {})[template] = Figure(sum(xs) / len(xs), seed_interval(xs, ACCURACY) if len(xs) > 1 else None)
    return out


def _ci(x) -> tuple[float, float] | None:
    return (float(x[0]), float(x[1])) if x else None


def table(results: list[Result]) -> str:
    """Markdown: one row per result, one column per split and the overall figure."""
    cols = list(dict.fromkeys(k for r in results for k in r.splits if k != "overall")) + ["overall"]
    lines = ["| run | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += ["| " + r.label + " | " + " | ".join(str(r.splits[c]) if c in r.splits else "—" for c in cols) + " |"
              for r in results]
    return "\n".join(lines)


def template_table(results: list[Result]) -> str:
    """Markdown: per split and template, one column per result; empty when no result has templates."""
    rows = sorted({(s, t) for r in results for s, ts in r.templates.items() for t in ts})
    if not rows:
        return ""
    lines = ["| split | template | " + " | ".join(r.label for r in results) + " |", "|---" * (len(results) + 2) + "|"]
    for s, t in rows:
        cells = [str(r.templates[s][t]) if t in r.templates.get(s, {}) else "—" for r in results]
        lines.append(f"| {s} | {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: list[Result], out: str | Path) -> Path:
    """Grouped bars (one group per split and the overall figure, one bar per result) with the
    intervals as error bars, written as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("agentic-rl compare --plot needs matplotlib: pip install 'agentic-rl[plot]'") from None
    cols = list(dict.fromkeys(k for r in results for k in r.splits if k != "overall")) + ["overall"]
    width = 0.8 / len(results)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(cols), 3.6))
    for i, r in enumerate(results):
        xs = [j + (i - (len(results) - 1) / 2) * width for j, c in enumerate(cols) if c in r.splits]
        figs = [r.splits[c] for c in cols if c in r.splits]
        spans = [f.ci or (f.value, f.value) for f in figs]
        err = [[f.value - lo for f, (lo, _) in zip(figs, spans)], [hi - f.value for f, (_, hi) in zip(figs, spans)]]
        ax.bar(xs, [f.value for f in figs], width, yerr=err, capsize=3, label=r.label)
    ax.set_xticks(range(len(cols)), cols)
    ax.set_ylabel("held-out accuracy (95% interval)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
