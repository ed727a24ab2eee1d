"""The run report: one self-contained HTML file, rendered by headless Chromium with curves and a
token-level trajectory in which masked and sampled tokens look different."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.monitor.report import write_report
from agentic_rl.monitor.trajectories import write_trajectories
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.loop import Budget, rollout

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def run_dir(tmp_path, tokenizer):
    """A run folder: metrics (SFT, RL, an event) and two real calculator episodes, one with positive
    and one with negative advantages on its sampled tokens."""
    rows = [{"step": 1, "stage": "sft", "loss": 1.0}, {"step": 2, "stage": "sft", "loss": 0.5}]
    rows += [{"step": s, "stage": "rl", "reward_mean": 0.2 * s, "entropy": 1 / s, "accuracy": 0.1 * s} for s in (1, 2, 3)]
    rows.append({"step": 2, "stage": "event", "event": "remediation", "action": "entropy_bonus"})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = get_env("calculator")
    tasks = spec.tasks("train", 2, 0)
    fmt = spec.make_env({}).format
    acts = [[fmt.render_assistant_body(m) for m in demonstrate(spec, {}, t, tokenizer)[0] if m["role"] == "assistant"]
            for t in tasks]
    script = lambda r, k: acts[r][k] + (tokenizer.eos_token if k == len(acts[r]) - 1 else "")  # noqa: E731
    groups, _ = rollout(ScriptedEngine(tokenizer, script), lambda: spec.make_env({}), tasks, 1,
                        SamplingParams(1.0, 1.0, 256, fmt.stop_strings), Budget(6, 256, 1024))
    trajs = [g.trajectories[0] for g in groups]
    adv = [torch.tensor(t.loss_mask(), dtype=torch.float) * sign for t, sign in zip(trajs, (2.0, -2.0))]
    write_trajectories(tmp_path / "trajectories" / "rl.jsonl", trajs, tokenizer, adv, step=1)
    return tmp_path


def test_the_report_is_one_self_contained_file(run_dir, tokenizer):
    page = write_report(run_dir, tokenizer).read_text()
    assert "<svg" in page and "entropy_bonus" in page  # curves, with the event marked
    assert "src=\"http" not in page and "href=\"http" not in page  # nothing fetched from anywhere
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    first = data[0]["tokens"]
    assert {t[1] for t in first} == {0, 1} and any(t[4] for t in first)  # masked, sampled and tool tokens
    assert all(t[3] == 2.0 for t in first if t[1]) and all(t[3] == -2.0 for t in data[1]["tokens"] if t[1])


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_renders_masked_and_sampled_tokens_differently(run_dir, tokenizer, tmp_path_factory):
    from PIL import Image

    page = write_report(run_dir, tokenizer)
    profile = tmp_path_factory.mktemp("chromium")
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=60).stdout
    assert dom.count('class="tok obs') > 100 and dom.count('class="tok act') > 20  # the script ran
    shot = run_dir / "shot.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1200,3000",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=60, check=True)
    raw = Image.open(shot).convert("RGB").tobytes()  # not getdata(): deprecated in Pillow 12.1
    pixels = [raw[i:i + 3] for i in range(0, len(raw), 3)]

    def count(rgb, tol=8):
        return sum(all(abs(p[i] - rgb[i]) <= tol for i in range(3)) for p in pixels)
    # |advantage| 2 draws alpha 0.75 over white: green (40,170,40) -> (94,191,94), red (220,40,40) -> (229,94,94)
    assert count((241, 241, 241)) > 1000  # masked tokens' grey background
    assert count((94, 191, 94)) > 200 and count((229, 94, 94)) > 200  # sampled tokens, by advantage sign
    assert count((39, 99, 196), tol=30) > 50  # the curves


def _with_eval(run_dir):
    stage = lambda a, b: {"heldout_in": {"n": 100, "accuracy": a, "accuracy_ci": [a - 0.09, a + 0.08]},  # noqa: E731
                          "heldout_out": {"n": 100, "accuracy": b}, "overall": (a + b) / 2}
    (run_dir / "eval.json").write_text(json.dumps({"base_zero_shot": stage(0.1, 0.05), "sft": stage(0.57, 0.28),
                                                   "rl": stage(0.95, 0.41), "timing_s": {"rl": 1.0}}))


def test_the_held_out_section_is_a_table_with_intervals_not_raw_dictionaries(run_dir, tokenizer):
    """Accuracy per stage and split, three decimals, each with its interval (an older eval.json's
    from its counts); (0.95 + 0.41) / 2 is 0.6799999999999999 in floating point, printed 0.680."""
    _with_eval(run_dir)
    page = write_report(run_dir, tokenizer).read_text()
    assert "<td>rl</td><td>0.950 [0.860, 1.030]</td><td>0.410 [" in page
    assert "0.680 [" in page and "0.6799999" not in page
    assert page.index("<td>base_zero_shot</td>") < page.index("<td>sft</td>") < page.index("<td>rl</td>")
    assert ">RL step</text>" in page and ">held-out accuracy by stage<" in page  # labelled axes, the bar chart


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_draws_the_held_out_bars(run_dir, tokenizer, tmp_path_factory):
    from PIL import Image

    _with_eval(run_dir)
    page = write_report(run_dir, tokenizer)
    shot = run_dir / "bars.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}", "--window-size=1200,1400",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=60, check=True)
    raw = Image.open(shot).convert("RGB").tobytes()
    rl_green = sum(1 for i in range(0, len(raw), 3) if abs(raw[i] - 26) < 6 and abs(raw[i + 1] - 127) < 6
                   and abs(raw[i + 2] - 55) < 6)
    assert rl_green > 500  # the RL stage's three bars (and its legend swatch)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_restarted_context_is_marked_where_it_starts(run_dir, tokenizer, tmp_path_factory):
    """An episode whose second turn started a new context (`Turn.restart`) shows one marker line,
    between the first action and the new prompt; the other episodes show none. (The record's flag is
    what `trajectory_record` writes: tests/trainer/test_agent_training.py reads it.)"""
    path = run_dir / "trajectories" / "rl.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["turns"][1]["restart"] = True
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = write_report(run_dir, tokenizer)
    data = json.loads(page.read_text().split('<script id="data" type="application/json">')[1].split("</script>")[0])
    marks = [i for i, t in enumerate(data[0]["tokens"]) if t[1] == 2]
    assert len(marks) == 1 and not any(t[1] == 2 for t in data[1]["tokens"])
    before = len(first["turns"][0]["obs_ids"]) + len(first["turns"][0]["action_ids"])
    assert marks[0] == before  # right after the first turn's action
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=60).stdout
    assert dom.count('class="restart"') == 1 and "new context" in dom


def test_the_reward_components_hacking_rates_and_ladder_are_drawn_and_each_episode_shows_its_components(
        run_dir, tokenizer):
    """Curves for `reward/<name>` (not its nested details), `hacking/<name>` and the ladder's pass
    rates; a hacking warning is marked; the viewer's episodes carry their reward's components."""
    rows = [{"step": s, "stage": "rl", "reward_mean": 0.5, "reward/outcome": 0.1 * s, "reward/outcome/tier_reached": 2.0,
             "hacking/format_gaming": 0.2 * s, "ladder/syntax/pass_rate": 0.9, "ladder/seconds": 0.1} for s in (1, 2)]
    rows.append({"step": 2, "stage": "event", "event": "hacking_warning", "evidence": {}})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = run_dir / "trajectories" / "rl.jsonl"
    episodes = [json.loads(line) for line in path.read_text().splitlines()]
    episodes[0]["reward_details"] = {"correct": 1.0, "format": 1.0, "outcome/tier_reached": 3.0}
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    page = write_report(run_dir, tokenizer).read_text()
    captions = [c.split("</figcaption>")[0] for c in page.split("<figcaption>")[1:]]
    assert {"reward/outcome", "hacking/format_gaming", "ladder/syntax/pass_rate", "ladder/seconds"} <= set(captions)
    assert "reward/outcome/tier_reached" not in captions and "<title>hacking_warning</title>" in page
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    assert data[0]["details"] == {"correct": 1.0, "format": 1.0}
