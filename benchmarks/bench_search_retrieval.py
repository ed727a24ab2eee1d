"""The Search-R1 retrieval side, measured: corpus sizes, index build time, query latency, and recall@k
of the gold passage for the demonstrator's queries, on the knowledge base alone and with Wikipedia
distractors mixed in.

    python benchmarks/bench_search_retrieval.py --wiki-dump PATH/gensim-*.whl

`--wiki-dump` is a gensim wheel (`pip download gensim --no-deps -d DIR`) or its enwiki .bz2; without
it an installed gensim is used, and with neither only the knowledge base is measured. Writes
benchmarks/results/search_retrieval.json and prints a markdown table. About a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from agentic_rl.data import search_qa
from agentic_rl.data.search_kb import world
from agentic_rl.tools.search import BM25Retriever, format_passages

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "search_retrieval.json"
TASKS_PER_SPLIT = 500
KS = (1, 3, 5)


def _timed(fn, repeats: int = 1):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def _corpora(wiki_dump: str | None) -> dict:
    kb = search_qa.load_corpus("kb")
    corpora = {"kb": kb}
    try:
        from agentic_rl.data.wiki_distractors import wiki_passages

        wiki, seconds = _timed(lambda: wiki_passages(wiki_dump))
        print(f"Wikipedia passages: {len(wiki)} in {seconds:.2f} s")
        corpora["kb+wiki"] = kb + list(wiki)
        corpora["kb+wiki(50-word chunks)"] = kb + list(wiki_passages(wiki_dump, chunk_words=50))
    except FileNotFoundError as e:
        print(f"no Wikipedia distractors: {e}")
    return corpora


def _recall(retriever: BM25Retriever, tasks) -> tuple[dict, list[float]]:
    """recall@k per hop for one- and two-hop questions, both hops found for two-hop, query latencies."""
    found = {h: {k: [] for k in KS} for h in (1, 2)}
    both = {k: [] for k in KS}
    latencies = []
    for t in tasks:
        hits = {k: [] for k in KS}
        for query, gold in zip(search_qa.demonstration_queries(t), t.meta["gold_passages"]):
            start = time.perf_counter()
            ranked = [p.id for p in retriever.search(query, max(KS))]
            latencies.append(time.perf_counter() - start)
            for k in KS:
                hits[k].append(gold in ranked[:k])
        for k in KS:
            found[t.meta["hops"]][k] += hits[k]
            if t.meta["hops"] == 2:
                both[k].append(all(hits[k]))
    mean = lambda xs: round(sum(xs) / len(xs), 4)  # noqa: E731
    return ({f"{h}-hop": {f"@{k}": mean(v) for k, v in ks.items()} for h, ks in found.items()}
            | {"2-hop both hops": {f"@{k}": mean(v) for k, v in both.items()}}), latencies


def _demonstrations(retriever: BM25Retriever, tasks, max_chars: int) -> dict:
    """How often the demonstrator needs its fallback query, fails, and how long its tool messages are."""
    fallbacks, failures, lengths = 0, 0, []
    for t in tasks:
        try:
            msgs = search_qa.demonstration(t, retriever, 3, max_chars)
        except RuntimeError:
            failures += 1
            continue
        queries = [m["content"].split("<search>")[1].removesuffix("</search>") for m in msgs[0:-1:2]]
        fallbacks += sum(q != first for q, first in zip(queries, search_qa.demonstration_queries(t)))
        lengths += [len(m["content"]) for m in msgs[1::2]]
    return {"max_chars": max_chars, "fallback_queries": fallbacks, "failed_tasks": failures,
            "tool_chars_median": statistics.median(lengths) if lengths else None}


def measure(name: str, passages, tasks: dict) -> dict:
    retriever, build = _timed(lambda: BM25Retriever(passages), repeats=3)
    row = {"corpus": name, "passages": len(passages), "index_build_s": round(build, 3)}
    latencies = []
    for split, ts in tasks.items():
        row[split], lat = _recall(retriever, ts)
        latencies += lat
    row["query_latency_ms_median"] = round(1e3 * statistics.median(latencies), 3)
    row["query_latency_ms_p99"] = round(1e3 * sorted(latencies)[int(0.99 * len(latencies))], 3)
    row["demonstrations"] = [_demonstrations(retriever, [t for ts in tasks.values() for t in ts], m) for m in (600, 1000)]
    top3 = [len(format_passages(retriever.search(q, 3), 10**6)) for t in tasks["train"][:200]
            for q in search_qa.demonstration_queries(t)]
    row["top3_chars_median"], row["top3_chars_max"] = statistics.median(top3), max(top3)
    row["question_as_query"] = _question_as_query(retriever, tasks["train"])
    return row


def _question_as_query(retriever: BM25Retriever, tasks) -> dict:
    """recall@3 of each hop's gold passage when the question itself is the one query (a policy that
    does not chain): the second hop's entity is not in a two-hop question, so its passage rarely comes."""
    hop = {0: [], 1: []}
    for t in tasks:
        ranked = {p.id for p in retriever.search(t.prompt, 3)}
        for i, gold in enumerate(t.meta["gold_passages"]):
            hop[i].append(gold in ranked)
    return {f"hop{i + 1}@3": round(sum(v) / len(v), 4) for i, v in hop.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wiki-dump", default=None, help="a gensim wheel or its enwiki .bz2 (default: installed gensim)")
    args = parser.parse_args()
    _, world_s = _timed(lambda: world.__wrapped__(0))
    kb_lengths = [len(p.text) for p in search_qa.load_corpus("kb")]
    tasks = {s: search_qa.make_tasks(TASKS_PER_SPLIT, 0, s) for s in search_qa.SPLITS}
    rows = [measure(name, ps, tasks) for name, ps in _corpora(args.wiki_dump).items()]
    result = {"world_generation_s": round(world_s, 3), "kb_passage_chars_median": statistics.median(kb_lengths),
              "tasks_per_split": TASKS_PER_SPLIT, "rows": rows}
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(f"world generated in {world_s:.3f} s; KB passage median {statistics.median(kb_lengths)} chars")
    print("| corpus | passages | index build s | query ms (median) | split | 1-hop @1/@3 | 2-hop per hop @1/@3 | 2-hop both @3 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for s in search_qa.SPLITS:
            rec = r[s]
            print(f"| {r['corpus']} | {r['passages']} | {r['index_build_s']} | {r['query_latency_ms_median']} | {s} | "
                  f"{rec['1-hop']['@1']}/{rec['1-hop']['@3']} | {rec['2-hop']['@1']}/{rec['2-hop']['@3']} | "
                  f"{rec['2-hop both hops']['@3']} |")
        print(f"  demonstrations: {r['demonstrations']}; top-3 block median {r['top3_chars_median']}, max "
              f"{r['top3_chars_max']} chars; the question as the only query: {r['question_as_query']}")


if __name__ == "__main__":
    main()
