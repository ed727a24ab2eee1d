"""Local data for the text envs SkyRL-Gym ships, made where SkyRL's own scripts would download it:
rows in SkyRL's dataset layout (`prompt` messages, `env_class`, `reward_spec`, `extra_info` and the
env's own fields), so a local row and a row of a SkyRL dataset file go through the same code.

  gsm8k, gsm8k_multi_turn  our calculator word problems (`data/calculator.py`), not GSM8K itself
  text2sql                 our generated SQLite databases (`data/sql_tasks.py`), written as files in
                           SkyRL's Spider layout `DB_PATH/spider/database/DB_ID/DB_ID.sqlite`
  search                   the Search-R1 world (`data/search_qa.py`), its BM25 retriever served on
                           loopback with the retrieval API SkyRL's search tool posts to

The prompts are ours, written for each env's protocol (its tags and answer format).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPLITS = ("train", "heldout")
SEARCH_TURNS = 4  # a two-hop question takes two searches and the answer (SkyRL's own default is 2)
GSM8K_SUFFIX = ' Think step by step, then give the final answer after "####", as in "#### 42".'
SQL_SYSTEM = ("You answer questions about a SQLite database by writing SQL. Think inside <think></think> before "
              "each step. To run a query, write it inside <sql></sql>; its result comes back inside "
              "<observation></observation>. When you are sure, give the final query inside <solution></solution>.")
SEARCH_SYSTEM = ("You answer questions about a fictional world. Think inside <think></think>. To search, write a "
                 "query inside <search></search>; the results come back inside <information></information>. "
                 "Give the final answer, a short name, inside <answer></answer>.")


@dataclass(frozen=True)
class LocalData:
    """One env's local rows (`rows(split, n, seed)`), the env_config that reaches them, where a
    policy's action stops (the env's closing action tags; none: each action is a whole reply), and
    `solve(extras)`, a reply that solves a row (for SFT), where there is one without a tool."""

    rows: Callable[[str, int, int], list[dict]]
    env_config: Callable[[], dict] = dict
    stop: tuple[str, ...] = ()
    solve: Callable[[Mapping[str, Any]], str] | None = None
    single_turn: bool = False  # the env ends every episode at its first step


def _gsm8k_rows(env_class: str, split: str, n: int, seed: int) -> list[dict]:
    from agentic_rl.data import calculator

    tasks = calculator.make_tasks(n, seed, {"train": "train", "heldout": "heldout_out"}[split])
    return [{"data_source": "agentic_rl/calculator", "env_class": env_class,
             "prompt": [{"role": "user", "content": t.prompt + GSM8K_SUFFIX}],
             "reward_spec": {"method": "rule", "ground_truth": str(t.answer)},
             "extra_info": {"split": split, "index": i, "expression": t.meta["expression"]}}
            for i, t in enumerate(tasks)]


def _solve_gsm8k(extras: Mapping[str, Any]) -> str:
    """The arithmetic, then the answer in GSM8K's `####` form."""
    truth = extras["reward_spec"]["ground_truth"]
    return f"{extras['extra_info']['expression']} = {truth}\n#### {truth}"


def _solve_sql(extras: Mapping[str, Any]) -> str:
    """The gold query as the solution, reasoned first (SkyRL's SQL reward requires a <think>)."""
    return f"<think>One query answers it.</think>\n<solution>{extras['reward_spec']['ground_truth']}</solution>"


def _sql_rows(split: str, n: int, seed: int) -> list[dict]:
    from agentic_rl.data import sql_tasks

    rows = []
    for i, t in enumerate(sql_tasks.make_tasks(n, seed, {"train": "train", "heldout": "heldout_in"}[split])):
        write_database(sql_db_root(), t.meta["db_id"], t.meta["schema_sql"])
        question = t.prompt.split(": ", 1)[1]
        rows.append({"data_source": "agentic_rl/sql", "env_class": "text2sql", "db_id": t.meta["db_id"], "data": "spider",
                     "prompt": [{"role": "system", "content": SQL_SYSTEM},
                                {"role": "user", "content": f"Database schema:\n{schema_text(t.meta['schema_sql'])}\n\n"
                                                            f"Question: {question}"}],
                     "reward_spec": {"method": "rule", "ground_truth": t.answer},
                     "extra_info": {"split": split, "index": i}})
    return rows


def schema_text(schema_sql: str) -> str:
    """The CREATE TABLE statements of a database script (its rows are for the database, not the prompt)."""
    return "\n".join(s.strip() + ";" for s in schema_sql.split(";") if s.strip().upper().startswith("CREATE"))


def sql_db_root() -> Path:
    """Where the generated databases are written (one directory per user, reused across runs)."""
    return Path(tempfile.gettempdir()) / f"agentic_rl-skyrl-sql-{os.getuid()}"


def write_database(root: Path, db_id: str, schema_sql: str) -> Path:
    """`root/spider/database/DB_ID/DB_ID.sqlite`, built from its script unless the file beside it
    holds this very script (written aside, then renamed, so a reader never sees half a database)."""
    path = root / "spider" / "database" / db_id / f"{db_id}.sqlite"
    script = path.with_suffix(".sql")
    if path.exists() and script.exists() and script.read_text() == schema_sql:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.part")
    part.unlink(missing_ok=True)
    db = sqlite3.connect(part)
    try:
        db.executescript(schema_sql)
        db.commit()
    finally:
        db.close()
    part.replace(path)
    script.write_text(schema_sql)
    return path


def _search_rows(split: str, n: int, seed: int) -> list[dict]:
    from agentic_rl.data import search_qa

    tasks = search_qa.make_tasks(n, seed, {"train": "train", "heldout": "heldout_in"}[split])
    return [{"data_source": "agentic_rl/search_r1", "env_class": "search",
             "prompt": [{"role": "system", "content": SEARCH_SYSTEM},
                        {"role": "user", "content": f"Question: {t.prompt}"}],
             "reward_spec": {"method": "rule", "ground_truth": {"target": [t.answer, *t.meta["aliases"]]}},
             "max_turns": SEARCH_TURNS, "extra_info": {"split": split, "index": i}} for i, t in enumerate(tasks)]


class _Retrieve(http.server.BaseHTTPRequestHandler):
    """POST /retrieve {"query", "topk"} -> {"result": [[{"document": {"contents"}, "score"}]]}: the
    retrieval server's API as SkyRL's search tool calls it, over our BM25 index."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        from agentic_rl.envs.builtin.search_r1 import retriever

        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        found = retriever("kb").search(str(body.get("query", "")), int(body.get("topk", 3)))
        docs = [{"document": {"id": p.id, "contents": f'"{p.title}"\n{p.text}'}, "score": 1.0 / (r + 1)}
                for r, p in enumerate(found)]
        payload = json.dumps({"result": [docs]}).encode()
        self.send_response(200 if self.path == "/retrieve" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: one line a search otherwise
        pass


@functools.cache
def retrieval_url() -> str:
    """The loopback retrieval server of this process, started on first use (a daemon thread: it ends
    with the process)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Retrieve)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="agentic-rl-skyrl-retrieval", daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/retrieve"


LOCAL: dict[str, LocalData] = {
    "gsm8k": LocalData(functools.partial(_gsm8k_rows, "gsm8k"), solve=_solve_gsm8k, single_turn=True),
    "gsm8k_multi_turn": LocalData(functools.partial(_gsm8k_rows, "gsm8k_multi_turn"), solve=_solve_gsm8k),
    "text2sql": LocalData(_sql_rows, lambda: {"db_path": str(sql_db_root())}, stop=("</sql>",),
                          solve=_solve_sql),
    "search": LocalData(_search_rows, lambda: {"search_url": retrieval_url(), "topk": 3, "timeout": 30,
                                         "log_requests": False},
                        stop=("</search>",)),
}
