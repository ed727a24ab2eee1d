"""Task files: JSONL, Parquet and a datasets directory read as the same tasks; columns renamed; a
seeded held-out split; and each mistake in a file one message naming the file and line."""

from __future__ import annotations

import json

import pytest

from agentic_rl.data import task_files
from agentic_rl.errors import UserDataError, UserFileError

ROWS = [{"question": f"What is {a} + {b}?", "answer": str(a + b), "level": a % 3} for a, b in
        [(1, 2), (3, 4), (10, 20), (7, 8), (5, 5), (6, 9)]]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_parquet_and_a_datasets_directory_give_the_same_tasks(tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "t.parquet")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "ds"))
    got = [task_files.load_tasks(p, "train", {}, ("answer",))
           for p in (_jsonl(tmp_path / "t.jsonl", ROWS), tmp_path / "t.parquet", tmp_path / "ds")]
    assert got[0] == got[1] == got[2]
    t = got[0][2]
    assert (t.id, t.prompt, t.answer, t.meta) == ("train-2", "What is 10 + 20?", "30", {"level": 1, "split": "train"})


def test_columns_are_renamed_and_the_rest_goes_to_meta(tmp_path):
    rows = [{"problem": "2+2?", "solution": "4", "id": "p1", "tests": ["assert True"]}]
    (t,) = task_files.load_tasks(_jsonl(tmp_path / "t.jsonl", rows), "train", {"prompt": "problem", "answer": "solution"}, ())
    assert (t.id, t.prompt, t.answer, t.meta) == ("p1", "2+2?", "4", {"tests": ["assert True"], "split": "train"})


@pytest.mark.parametrize("content,reads,message", [
    ("", ("answer",), "t.jsonl: no tasks (the file is empty)"),
    ('{"question": "a?", "answer": "1"}\n{not json\n', ("answer",), "t.jsonl:2: not a JSON object"),
    ('{"question": "a?", "answer": "1"}\n[1, 2]\n', ("answer",), "t.jsonl:2: expected a JSON object, got list"),
    ('{"question": "a?", "answer": "1"}\n{"question": "b?"}\n', ("answer",), "t.jsonl:2: no 'answer' column"),
    ('{"question": "a?"}\n', ("tests",), "t.jsonl:1: no 'tests' column, which the verifier checks against"),
    ('{"text": "a?", "answer": "1"}\n', ("answer",), "t.jsonl:1: no prompt (a 'prompt' or 'question' column"),
    ('{"question": "a?", "answer": "1", "messages": "hi"}\n', ("answer",), "t.jsonl:1: messages must be a list"),
])
def test_each_mistake_in_a_file_is_one_message_with_its_line(tmp_path, content, reads, message):
    (tmp_path / "t.jsonl").write_text(content)
    with pytest.raises(UserDataError) as e:
        task_files.load_tasks(tmp_path / "t.jsonl", "train", {}, reads)
    assert message in str(e.value)


def test_a_missing_file_and_a_directory_of_splits_are_named(tmp_path):
    import datasets

    with pytest.raises(UserFileError, match="task file not found"):
        task_files.load_tasks(tmp_path / "none.jsonl", "train", {}, ())
    datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS)}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(UserDataError, match="holds the splits train; name one as .*dd/train"):
        task_files.load_tasks(tmp_path / "dd", "train", {}, ())
    assert len(task_files.load_tasks(tmp_path / "dd" / "train", "train", {}, ())) == len(ROWS)


def test_a_seeded_split_is_deterministic_disjoint_and_refuses_leaks(tmp_path):
    tasks = task_files.load_tasks(_jsonl(tmp_path / "t.jsonl", ROWS), "train", {}, ())
    train, held = task_files.split_tasks(tasks, 0.34, seed=3)
    assert (train, held) == task_files.split_tasks(tasks, 0.34, seed=3)
    assert len(held) == 2 and not {t.id for t in train} & {t.id for t in held}  # round(0.34 x 6) = 2
    task_files.check_disjoint(train, held, "t.jsonl")
    with pytest.raises(UserDataError, match="held-out task 'train-1' has a prompt that is also in training"):
        task_files.check_disjoint(tasks, tasks[1:2], "t.jsonl")


def test_training_goes_round_the_file_and_a_held_out_split_gives_each_task_once(tmp_path):
    tasks = task_files.load_tasks(_jsonl(tmp_path / "t.jsonl", ROWS), "train", {}, ())
    drawn = task_files.draw(tasks, 15, seed=0, repeat=True)
    assert len(drawn) == 15 and {t.id for t in drawn[:6]} == {t.id for t in tasks}  # every task before any twice
    assert drawn[6:12] != drawn[:6]  # the second round is reshuffled
    once = task_files.draw(tasks, 15, seed=0, repeat=False)
    assert sorted(t.id for t in once) == sorted(t.id for t in tasks)
