"""Bugs by mutation (SWE-smith's recipe): AST-located, text-applied, one small change each.

`MUTATORS` maps a kind to a function `(tree, source) -> [Site]`. A site changes one span of the
source: only the operator token between two operands, one constant, one argument order, one
statement removed — everything else of the line stays as written, so the bug reads like a typo,
not like reformatted code. `sites(project files)` enumerates every candidate in a fixed order;
the builder (`swe_build.py`) shuffles them by seed and keeps those its tests catch.

A `Mutation` is stored line-aligned: the lines it changed (`before`), what they became (`after`)
and where (`line`); `before`/`after` are widened with neighbouring lines until `after` occurs
exactly once in the mutated file, so the inverse edit (replace `after` by `before`) is one exact
search/replace, the env's own edit tool.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass

from agentic_rl.registry import Registry

MUTATORS: Registry = Registry("mutation kind")
TRAIN_KINDS = ("operator_swap", "off_by_one", "remove_condition", "wrong_constant")
HELDOUT_KINDS = ("swap_arguments", "drop_return")  # never trained on: the `heldout_kinds` split


@dataclass(frozen=True)
class Site:
    """One candidate: replace source[start:end] (character offsets) by `text`."""

    kind: str
    start: int
    end: int
    text: str
    what: str  # e.g. "`<` -> `<=`" (for people reading the instance file; never shown to the model)


@dataclass(frozen=True)
class Mutation:
    file: str
    kind: str
    line: int  # 1-based first line of `before` in the original file (of `after` in the mutated one)
    before: str
    after: str
    what: str

    def apply(self, text: str) -> str:
        return _swap_block(text, self.line, self.before, self.after)

    def revert(self, text: str) -> str:
        return _swap_block(text, self.line, self.after, self.before)

    def changed_lines(self) -> list[str]:
        """The mutated lines that differ from the original ones (what an issue must never quote)."""
        before = set(self.before.splitlines())
        return [line for line in self.after.splitlines() if line.strip() and line not in before]

    def telling_lines(self) -> list[str]:
        """What would give the bug or its fix away if an issue quoted it: the changed lines and the
        original lines the mutation changed or removed, those that hold a word (a lone `)` tells nothing)."""
        after = set(self.after.splitlines())
        lines = self.changed_lines() + [line for line in self.before.splitlines() if line not in after]
        return [line for line in lines if re.search(r"\w\w", line)]

    def to_dict(self) -> dict:
        return asdict(self)


def _swap_block(text: str, line: int, old: str, new: str) -> str:
    lines = text.split("\n")
    n = old.count("\n") + 1
    if "\n".join(lines[line - 1: line - 1 + n]) != old:
        raise ValueError(f"line {line} does not hold the expected text")
    return "\n".join([*lines[: line - 1], *([new] if new or n else []), *lines[line - 1 + n:]])


def mutate(file: str, source: str, site: Site) -> tuple[Mutation, str]:
    """The mutation (line-aligned, widened until unique) and the mutated source."""
    mutated = source[: site.start] + site.text + source[site.end:]
    first = source.count("\n", 0, site.start)  # 0-based line of the span's start
    last_old = source.count("\n", 0, site.end)
    last_new = last_old + site.text.count("\n") - source.count("\n", site.start, site.end)
    old_lines, new_lines = source.split("\n"), mutated.split("\n")
    lo, hi_old, hi_new = first, last_old + 1, last_new + 1
    while True:
        after = "\n".join(new_lines[lo:hi_new])
        if mutated.count(after) == 1 and after.strip():
            break
        if lo == 0 and hi_new >= len(new_lines):
            raise ValueError("the mutated block never becomes unique")
        lo, hi_old, hi_new = max(lo - 1, 0), min(hi_old + 1, len(old_lines)), min(hi_new + 1, len(new_lines))
    return Mutation(file, site.kind, lo + 1, "\n".join(old_lines[lo:hi_old]), after, site.what), mutated


# ----------------------------------------------------------------------------- offsets
class _Offsets:
    """AST positions (line, UTF-8 byte column) as character offsets into the source."""

    def __init__(self, source: str):
        self.source, self.starts, pos = source, [], 0
        for line in source.split("\n"):
            self.starts.append(pos)
            pos += len(line) + 1
        self.lines = source.split("\n")

    def at(self, line: int, col: int) -> int:
        text = self.lines[line - 1]
        return self.starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8", "replace"))

    def span(self, node) -> tuple[int, int]:
        return self.at(node.lineno, node.col_offset), self.at(node.end_lineno, node.end_col_offset)

    def text(self, node) -> str:
        a, b = self.span(node)
        return self.source[a:b]


def _gap_swap(off: _Offsets, left, right, token: str, new: str, kind: str) -> Site | None:
    """Replace the operator `token` written between two operands (the only change to the line)."""
    a, b = off.span(left)[1], off.span(right)[0]
    gap = off.source[a:b]
    words = gap.replace("(", " ").replace(")", " ").split()
    if " ".join(words) != token:  # comments, odd spacing or parentheses we do not parse: not a site
        return None
    i = gap.index(token.split()[0])
    j = gap.rindex(token.split()[-1]) + len(token.split()[-1])
    return Site(kind, a + i, a + j, new, f"`{token}` -> `{new}`")


BINOPS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*"),
          ast.FloorDiv: ("//", "*"), ast.Mod: ("%", "//"), ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"),
          ast.LShift: ("<<", ">>"), ast.RShift: (">>", "<<")}
INVERTED = {ast.Lt: ("<", ">"), ast.Gt: (">", "<"), ast.LtE: ("<=", ">="), ast.GtE: (">=", "<="),
            ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
            ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}
BOUNDARY = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">")}


def _compare_pairs(node: ast.Compare):
    lefts = [node.left, *node.comparators[:-1]]
    return zip(lefts, node.ops, node.comparators)


def _skip(tree: ast.AST) -> set[int]:
    """Nodes never mutated: docstrings, and everything inside f-strings and type annotations."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
        for part in (node,) if isinstance(node, ast.JoinedStr) else ():
            out.update(id(n) for n in ast.walk(part))
        for ann in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if ann is not None:
                out.update(id(n) for n in ast.walk(ann))
    return out


# ----------------------------------------------------------------------------- the kinds
@MUTATORS.register("operator_swap")
def operator_swap(tree: ast.AST, source: str) -> list[Site]:
    """`+` -> `-`, `<` -> `>`, `==` -> `!=`, `in` -> `not in`, `and` -> `or`, ..."""
    off, out = _Offsets(source), []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            out.append(_gap_swap(off, node.left, node.right, *BINOPS[type(node.op)], "operator_swap"))
        elif isinstance(node, ast.Compare):
            out += [_gap_swap(off, a, b, *INVERTED[type(op)], "operator_swap") for a, op, b in _compare_pairs(node)
                    if type(op) in INVERTED]
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            token, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            out.append(_gap_swap(off, node.values[0], node.values[1], token, new, "operator_swap"))
    return [s for s in out if s is not None]


@MUTATORS.register("off_by_one")
def off_by_one(tree: ast.AST, source: str) -> list[Site]:
    """`<` -> `<=` (and the other boundaries), and an integer index, slice bound or range() argument ±1."""
    off, out, skip = _Offsets(source), [], _skip(tree)
    ints = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            out += [_gap_swap(off, a, b, *BOUNDARY[type(op)], "off_by_one") for a, op, b in _compare_pairs(node)
                    if type(op) in BOUNDARY]
        elif isinstance(node, ast.Subscript):
            ints += [n for n in ast.walk(node.slice) if _is_int(n)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            ints += [n for a in node.args for n in ast.walk(a) if _is_int(n)]
    for n in ints:
        if id(n) not in skip:
            text = off.text(n)
            out.append(Site("off_by_one", *off.span(n), str(n.value + 1), f"`{text}` -> `{n.value + 1}`"))
    return [s for s in out if s is not None]


def _is_int(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _in_index(tree: ast.AST) -> set[int]:
    """Integer constants that `off_by_one` owns (indices, slice bounds, range arguments)."""
    owned = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            owned.update(id(n) for n in ast.walk(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            owned.update(id(n) for a in node.args for n in ast.walk(a))
    return owned


@MUTATORS.register("remove_condition")
def remove_condition(tree: ast.AST, source: str) -> list[Site]:
    """One operand of an `and`/`or` in an if/while/return condition dropped, or a whole `if` without
    an else removed (a guard clause, a special case)."""
    off, out = _Offsets(source), []
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and isinstance(test, ast.BoolOp):
            for keep in test.values:
                a, b = off.span(test)
                out.append(Site("remove_condition", a, b, off.text(keep), f"`{off.text(test)}` -> `{off.text(keep)}`"))
        for block in ("body", "orelse"):
            stmts = getattr(node, block, None)
            if not isinstance(stmts, list):
                continue
            for stmt in stmts:
                if isinstance(stmt, ast.If) and not stmt.orelse and not (block == "orelse" and len(stmts) == 1):
                    out.append(_remove_statement(off, stmt, alone=len(stmts) == 1))
    return [s for s in out if s is not None]


def _remove_statement(off: _Offsets, stmt, alone: bool) -> Site | None:
    line = off.lines[stmt.lineno - 1]
    indent = line[: len(line) - len(line.lstrip())]
    if line.strip() != line[stmt.col_offset:].strip() or off.lines[stmt.end_lineno - 1][stmt.end_col_offset:].strip():
        return None  # shares a line with other code
    a = off.starts[stmt.lineno - 1]
    b = off.starts[stmt.end_lineno - 1] + len(off.lines[stmt.end_lineno - 1])
    if alone:
        return Site("remove_condition", a, b, indent + "pass", f"`{line.strip()}` block removed")
    return Site("remove_condition", a, min(b + 1, len(off.source)), "", f"`{line.strip()}` block removed")


@MUTATORS.register("wrong_constant")
def wrong_constant(tree: ast.AST, source: str) -> list[Site]:
    """True <-> False, an integer n -> n + 1 (outside indices), a float doubled, a short string's
    case swapped."""
    off, out, skip = _Offsets(source), [], _skip(tree) | _in_index(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in skip:
            continue
        value, new = node.value, None
        if isinstance(value, bool):
            new = repr(not value)
        elif isinstance(value, int):
            new = repr(value + 1)
        elif isinstance(value, float):
            new = repr(value * 2 if value else 1.0)
        elif isinstance(value, str) and 0 < len(value) <= 20 and value.swapcase() != value:
            new = repr(value.swapcase())
        text = off.text(node)
        if new is not None and text and not text.startswith(("-", "b", "f", "r", "u", "B", "F", "R", "U")):
            out.append(Site("wrong_constant", *off.span(node), new, f"`{text}` -> `{new}`"))
    return out


@MUTATORS.register("swap_arguments")
def swap_arguments(tree: ast.AST, source: str) -> list[Site]:
    """The first two positional arguments of a call exchanged."""
    off, out = _Offsets(source), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            first, second = off.text(node.args[0]), off.text(node.args[1])
            if first == second or "\n" in first + second:
                continue
            a, b = off.span(node.args[0])[0], off.span(node.args[1])[1]
            gap = off.source[off.span(node.args[0])[1]: off.span(node.args[1])[0]]
            out.append(Site("swap_arguments", a, b, second + gap + first, f"`{first}, {second}` -> `{second}, {first}`"))
    return out


@MUTATORS.register("drop_return")
def drop_return(tree: ast.AST, source: str) -> list[Site]:
    """`return <expr>` -> `<expr>`: the value is computed and dropped, the function goes on."""
    off, out = _Offsets(source), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None and not isinstance(node.value, ast.Constant):
            a, b = off.span(node)
            text = off.text(node)
            if text.startswith("return ") and node.lineno == node.end_lineno:
                out.append(Site("drop_return", a, b, off.text(node.value), f"`{text}` -> `{off.text(node.value)}`"))
    return out


# ----------------------------------------------------------------------------- enumeration
def sites(files: Mapping[str, str], kind: str, is_source: Callable[[str], bool]) -> Iterator[tuple[str, Site]]:
    """Every site of `kind` in the files `is_source` accepts, in file then position order."""
    mutator = MUTATORS.get(kind)
    for path in sorted(files):
        if not path.endswith(".py") or not is_source(path):
            continue
        try:
            tree = ast.parse(files[path])
        except SyntaxError:
            continue
        found = {(s.start, s.end, s.text): s for s in mutator(tree, files[path])}
        original = ast.dump(tree)
        for key in sorted(found):
            if _valid(files[path], found[key], original):
                yield path, found[key]


def _valid(source: str, site: Site, original: str) -> bool:
    """The mutated file parses and means something else (a change to layout alone is no bug)."""
    try:
        return ast.dump(ast.parse(source[: site.start] + site.text + source[site.end:])) != original
    except SyntaxError:
        return False
