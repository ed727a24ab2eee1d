"""`agentic-rl seeds`: the seeds' mean and t-interval per stage and split, computed by hand; seeds
already evaluated are not trained again."""

from __future__ import annotations

import json

import pytest

from agentic_rl.cli import main


def _eval(path, rl_in: float, rl_out: float) -> None:
    path.mkdir(parents=True)
    stage = lambda a, b: {"heldout_in": {"n": 100, "accuracy": a}, "heldout_out": {"n": 100, "accuracy": b},  # noqa: E731
                          "overall": (a + b) / 2}
    (path / "eval.json").write_text(json.dumps({"base_zero_shot": stage(0.1, 0.1), "rl": stage(rl_in, rl_out),
                                                "timing_s": {"rl": 1.0}}))


def test_seeds_already_evaluated_are_summarized_as_mean_and_t_interval(tmp_path, capsys):
    """Seeds 0.80 / 0.90 / 1.00 in-template: mean 0.90, sd 0.10, t(2) 4.303 -> 0.90 ± 0.2484 (cut at 1); no seed
    is trained again (a train would fail: the recipe's model is a path that does not exist)."""
    for seed, (a, b) in zip((2, 3, 4), ((0.8, 0.3), (0.9, 0.4), (1.0, 0.5))):
        _eval(tmp_path / f"seed{seed}", a, b)
    assert main(["seeds", "recipes/tiny.yaml", "--seeds", "2,3,4", "--set", f"output_dir={tmp_path}",
                 "--set", "model.name=/nonexistent"]) == 0
    summary = json.loads((tmp_path / "seeds.json").read_text())
    assert summary["stage"] == "rl" and summary["seeds"] == [2, 3, 4]
    rl_in = summary["accuracy"]["heldout_in"]
    assert rl_in["values"] == [0.8, 0.9, 1.0] and rl_in["mean"] == pytest.approx(0.9)
    assert rl_in["interval"] == pytest.approx([0.9 - 0.2484, 1.0], abs=1e-4)  # 1.1484 cut at 1: an accuracy
    assert summary["accuracy"]["overall"]["mean"] == pytest.approx(0.65)
    assert summary["stages"]["base_zero_shot"]["heldout_in"]["interval"] == pytest.approx([0.1, 0.1])
    assert "rl heldout_in: mean 0.900" in capsys.readouterr().out


def test_seeds_run_in_separate_commands_sum_up_to_all_of_them(tmp_path):
    """Seeds 2 and 3 launched as two commands into one folder: whichever writes `seeds.json` last
    covers both (0.8 and 1.0: mean 0.9), not only its own; a seed folder without an `eval.json`
    (stopped part way) is left out."""
    _eval(tmp_path / "seed2", 0.8, 0.3)
    _eval(tmp_path / "seed3", 1.0, 0.5)
    (tmp_path / "seed4" / "checkpoints").mkdir(parents=True)
    assert main(["seeds", "recipes/tiny.yaml", "--seeds", "3", "--set", f"output_dir={tmp_path}",
                 "--set", "model.name=/nonexistent"]) == 0
    summary = json.loads((tmp_path / "seeds.json").read_text())
    assert summary["seeds"] == [2, 3]
    assert summary["accuracy"]["heldout_in"]["values"] == [0.8, 1.0]
    assert summary["accuracy"]["heldout_in"]["mean"] == pytest.approx(0.9)


def test_compare_reads_a_seeds_folder_beside_a_run(tmp_path, capsys):
    for seed, (a, b) in zip((2, 3, 4), ((0.8, 0.3), (0.9, 0.4), (1.0, 0.5))):
        _eval(tmp_path / "seeds" / f"seed{seed}", a, b)
    main(["seeds", "recipes/tiny.yaml", "--seeds", "2,3,4", "--set", f"output_dir={tmp_path / 'seeds'}"])
    _eval(tmp_path / "one", 0.7, 0.2)
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "seeds"), str(tmp_path / "one")]) == 0
    out = capsys.readouterr().out
    assert "| seeds (mean of 3 seeds) | 0.900 [0.652, 1.000] | 0.400 [0.152, 0.648] | 0.650 [0.402, 0.898] |" in out
    assert "| one (rl) | 0.700 [" in out  # an interval from its counts (100 greedy episodes)


def test_a_seeds_folder_breaks_down_by_template_as_the_mean_over_seeds(tmp_path, capsys):
    """Template "a" at 0.5 / 1.0 / 0.75 over three seeds: mean 0.75, sd 0.25, t(2) 4.303 ->
    0.75 ± 4.303 x 0.25 / sqrt(3) = 0.75 ± 0.6211, cut at 1 (an accuracy)."""
    for seed, a in zip((2, 3, 4), (0.5, 1.0, 0.75)):
        _eval(tmp_path / f"seed{seed}", a, 0.3)
        data = json.loads((tmp_path / f"seed{seed}" / "eval.json").read_text())
        data["rl"]["heldout_in"]["accuracy_by_template"] = {"a": {"n": 4, "accuracy": a}}
        (tmp_path / f"seed{seed}" / "eval.json").write_text(json.dumps(data))
    main(["seeds", "recipes/tiny.yaml", "--seeds", "2,3,4", "--set", f"output_dir={tmp_path}"])
    capsys.readouterr()
    assert main(["compare", str(tmp_path)]) == 0
    assert "| heldout_in | a | 0.750 [0.129, 1.000] |" in capsys.readouterr().out


def test_a_single_seed_is_labelled_as_one_without_a_seed_interval(tmp_path, capsys):
    _eval(tmp_path / "single" / "seed2", 0.8, 0.3)
    main(["seeds", "recipes/tiny.yaml", "--seeds", "2", "--set", f"output_dir={tmp_path / 'single'}"])
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "single")]) == 0
    assert "| single (1 seed, no seed interval) | 0.800 [" in capsys.readouterr().out


def test_a_seed_that_fails_stops_with_a_message_and_keeps_the_seeds_before_it(tmp_path, capsys):
    """Seed 2 is evaluated already; seed 3's train fails at once (its model is a path that does not
    exist): one line naming the seed and its folder, exit status 2, no seeds.json."""
    _eval(tmp_path / "seed2", 0.8, 0.3)
    assert main(["seeds", "recipes/tiny.yaml", "--seeds", "2,3", "--set", f"output_dir={tmp_path}",
                 "--set", "model.name=/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "seed 3 stopped with exit status 2" in err and str(tmp_path / "seed3") in err
    assert not (tmp_path / "seeds.json").exists() and (tmp_path / "seed2" / "eval.json").exists()
