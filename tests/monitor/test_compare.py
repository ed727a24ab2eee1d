"""`agentic-rl compare`: the table and the plot from run folders and eval files, intervals included."""

from __future__ import annotations

import json

import pytest

from agentic_rl.cli import main
from agentic_rl.monitor import compare
from agentic_rl.monitor.intervals import bootstrap_ci


def _write(path, stage: dict, name: str = "eval.json", stages=("sft", "rl")) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(json.dumps({s: stage for s in stages} if stages else stage))


STAGE = {"heldout_in": {"n": 20, "accuracy": 0.75, "accuracy_ci": [0.55, 0.9],
                        "accuracy_by_template": {"shop": {"n": 8, "accuracy": 0.5, "ci": [0.125, 0.875]}}},
         "heldout_out": {"n": 20, "accuracy": 0.25, "accuracy_ci": [0.1, 0.45]}, "overall": 0.5, "overall_ci": [0.35, 0.65]}


def test_the_table_shows_each_runs_last_stage_with_its_intervals(tmp_path):
    _write(tmp_path / "a", STAGE)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "eval_rl.json").write_text(json.dumps(STAGE))
    results = [compare.load(tmp_path / "a"), compare.load(tmp_path / "b" / "eval_rl.json")]
    assert [r.label for r in results] == ["a (rl)", str(tmp_path / "b" / "eval_rl.json")]
    table = compare.table(results).splitlines()
    assert table[0] == "| run | heldout_in | heldout_out | overall |"
    assert table[2] == "| a (rl) | 0.750 [0.550, 0.900] | 0.250 [0.100, 0.450] | 0.500 [0.350, 0.650] |"
    assert "| heldout_in | shop | 0.500 [0.125, 0.875] | 0.500 [0.125, 0.875] |" in compare.template_table(results)
    assert compare.load(tmp_path / "a", "sft").label == "a (sft)"
    with pytest.raises(KeyError, match="no stage 'base_few_shot'"):
        compare.load(tmp_path / "a", "base_few_shot")


def test_an_eval_file_without_intervals_gets_them_from_its_counts(tmp_path):
    """Written before evaluations had intervals: 15 of 20 greedy episodes right is the bootstrap
    interval of fifteen 1s and five 0s."""
    old = {"heldout_in": {"n": 20, "accuracy": 0.75}, "heldout_out": {"n": 20, "accuracy": 0.25}, "overall": 0.5}
    _write(tmp_path / "old", old)
    r = compare.load(tmp_path / "old")
    assert r.splits["heldout_in"].ci == bootstrap_ci([1.0] * 15 + [0.0] * 5)
    assert r.splits["overall"].ci is not None and r.splits["overall"].ci[0] < 0.5 < r.splits["overall"].ci[1]


def test_the_cli_prints_the_tables_and_draws_the_png(tmp_path, capsys):
    from PIL import Image

    _write(tmp_path / "a", STAGE)
    _write(tmp_path / "b", {**STAGE, "overall": 0.6})
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--plot", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out
    assert "| b (rl) |" in out and "| split | template |" in out and "wrote" in out
    with Image.open(tmp_path / "c.png") as image:
        assert image.format == "PNG" and image.size[0] > 300
    assert main(["compare", str(tmp_path / "nothing")]) == 2
