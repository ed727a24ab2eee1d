"""The worker of a repository session: runs inside the sandbox, holds the episode's copy of the
repository in its own size-capped tmpfs (/repo), and answers file and test operations as JSON lines.

Standard library only: this file's source is what the sandboxed interpreter runs (`python -c`), and
the host imports its pure functions (`replace_once`, `relative`) so that a replayed edit applies
exactly as the episode's did.

Why one process per episode: the copy lives in the sandbox (a symlink planted by a test resolves in
the sandbox's view, where only /usr and the copy exist), costs one sandbox start per episode, and
dies with it. The worker is pid 1 of the sandbox's pid namespace, so nothing inside can signal it,
and it makes itself non-dumpable, so nothing inside can open its file descriptors through /proc or
trace it. After every test run it kills every other process of the sandbox: a test that forked a
daemon leaves nothing behind.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time

ROOT = "/repo"
PRIVATE = "/tmp/.agentic"  # the runner and the pytest stand-in, written at setup
MAX_RESULTS = 8 << 20  # bytes of result lines kept from one run
SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".venv", "node_modules"}


# ----------------------------------------------------------------------------- pure (host too)
def relative(path: str) -> str | None:
    """`path` as a normalized path relative to the repository root, or None when it leaves it.
    Accepted: "a/b.py", "./a/b.py", "/repo/a/b.py"; refused: "../x", "/etc/passwd", "a/../../x"."""
    path = (path or ".").strip().replace("\\", "/")
    if path == ROOT or path.startswith(ROOT + "/"):
        path = path[len(ROOT):].lstrip("/") or "."
    if path.startswith("/"):
        return None
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) or "."


def replace_once(text: str, old: str, new: str) -> tuple[str | None, str]:
    """(the edited text, "") when `old` occurs exactly once in `text`, else (None, why not)."""
    if not old:
        return None, "old is empty: give the exact text to replace"
    count = text.count(old)
    if count == 0:
        hint = " (it differs in leading whitespace)" if old.strip() and text.count(old.strip()) else ""
        return None, f"old was not found{hint}; read the file and copy the text exactly"
    if count > 1:
        return None, f"old occurs {count} times; include more surrounding lines so it occurs once"
    return text.replace(old, new, 1), ""


# ----------------------------------------------------------------------------- inside the sandbox
def _inside(rel: str | None) -> str | None:
    """The absolute path of `rel` when it exists in the repository and resolves inside it (a
    symlink to elsewhere is refused, whatever it points at)."""
    if rel is None:
        return None
    full = os.path.join(ROOT, rel) if rel != "." else ROOT
    real = os.path.realpath(full)
    return full if real == ROOT or real.startswith(ROOT + "/") else None


def _where(path: str) -> tuple[str, str]:
    full = _inside(relative(path))
    if full is None:
        raise ValueError(f"{path!r} is outside the repository (paths are relative to its root)")
    if not os.path.lexists(full):
        raise ValueError(f"{path!r} does not exist")
    return full, os.path.relpath(full, ROOT)


def _walk(top: str):
    for base, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(base, d)))
        for name in sorted(files):
            yield os.path.relpath(os.path.join(base, name), ROOT)


def op_setup(req: dict) -> dict:
    """Write the repository (and the private helpers); `files` maps paths to text or {"b64": ...}."""
    for rel, content in req["files"].items():
        _write(os.path.join(ROOT, rel), content)
    for rel, content in req.get("private", {}).items():
        _write(os.path.join(PRIVATE, rel), content)
    return {"ok": True, "files": len(req["files"])}


def _write(full: str, content) -> None:
    os.makedirs(os.path.dirname(full), exist_ok=True)
    data = base64.b64decode(content["b64"]) if isinstance(content, dict) else content.encode()
    with open(full, "wb") as f:
        f.write(data)


def op_list(req: dict) -> dict:
    full, rel = _where(req.get("path", "."))
    if not os.path.isdir(full):
        return {"files": [rel]}
    return {"files": list(_walk(full))}


def op_read(req: dict) -> dict:
    full, rel = _where(req["path"])
    if os.path.isdir(full):
        raise ValueError(f"{rel!r} is a directory; list_files shows what it holds")
    with open(full, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    return {"path": rel, "lines": lines[max(req.get("start", 1), 1) - 1: req.get("end") or None],
            "start": max(req.get("start", 1), 1), "total": len(lines)}


def op_search(req: dict) -> dict:
    full, _ = _where(req.get("path", "."))
    pattern = req["pattern"]
    if not pattern:
        raise ValueError("the pattern is empty: give the text to look for")
    match = re.compile(pattern).search if req.get("regex") else (lambda line: pattern in line)
    hits, cap = [], int(req.get("max_hits", 200))
    files = list(_walk(full)) if os.path.isdir(full) else [os.path.relpath(full, ROOT)]
    for rel in files:
        if _inside(rel) is None:
            continue
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if match(line):
                        hits.append([rel, n, line.rstrip("\n")])
        except (UnicodeDecodeError, OSError):
            continue  # binary or unreadable: not searched
        if len(hits) > cap:
            break
    return {"hits": hits[:cap], "more": len(hits) > cap}


def op_edit(req: dict) -> dict:
    full, rel = _where(req["path"])
    if os.path.isdir(full):
        raise ValueError(f"{rel!r} is a directory")
    with open(full, encoding="utf-8") as f:
        text = f.read()
    edited, why = replace_once(text, req["old"], req["new"])
    if edited is None:
        raise ValueError(f"{rel}: {why}")
    with open(full, "w", encoding="utf-8") as f:
        f.write(edited)
    return {"path": rel, "line": text[: text.index(req["old"])].count("\n") + 1}


def op_test(req: dict) -> dict:
    """Run the tests: the private runner (structured results through a pipe), or the instance's own
    command (its output, parsed by the host). Every process the run left is killed after it."""
    rfd, wfd = os.pipe()
    argv = req["argv"]
    if argv is None:
        # not -I: it would ignore PYTHONHASHSEED, and a suite that parametrizes over a set needs it fixed
        # for its node ids to be the same on every run (the environment is ours alone anyway)
        argv = [sys.executable, "-S", os.path.join(PRIVATE, "runner.py"), json.dumps(req["runner"]), str(wfd)]
    out_path = os.path.join(PRIVATE, "output.txt")
    start = time.monotonic()
    with open(out_path, "wb") as out:
        try:
            proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    pass_fds=(wfd,), start_new_session=True, env=_test_env(req),
                                    preexec_fn=lambda: _child_limits(req["timeout_s"]))
        except OSError as e:
            os.close(rfd), os.close(wfd)
            return {"results": [], "status": f"could not start: {e}", "output": "", "seconds": 0.0}
    os.close(wfd)
    lines, status = _collect(proc, rfd, start + req["timeout_s"])
    _kill_others()
    with open(out_path, "rb") as f:
        output = f.read(req.get("max_output", 100_000)).decode("utf-8", "replace")
    return {"results": lines, "status": status, "output": output, "seconds": round(time.monotonic() - start, 3)}


def op_shell(req: dict) -> dict:
    """A shell command in the repository (`bash -c`, a fresh shell each time), its stdout and stderr
    together; every process it left is killed after it, as after a test run."""
    out_path = os.path.join(PRIVATE, "shell.txt")
    start = time.monotonic()
    with open(out_path, "wb") as out:
        try:
            proc = subprocess.Popen(["/bin/bash", "-c", req["command"]], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, env={**req.get("env", {}), **_test_env(req)},
                                    preexec_fn=lambda: _child_limits(req["timeout_s"]))
        except OSError as e:
            return {"output": "", "returncode": -1, "status": f"could not start: {e}", "seconds": 0.0}
        try:
            code, status = proc.wait(timeout=req["timeout_s"]), "ok"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code, status = proc.wait(), "timeout"
    _kill_others()
    with open(out_path, "rb") as f:
        output = f.read(req.get("max_output", 100_000)).decode("utf-8", "replace")
    return {"output": output, "returncode": code, "status": status, "seconds": round(time.monotonic() - start, 3)}


def op_snapshot(req: dict) -> dict:
    """Every file of the repository now (text, or {"b64": ...} when it is not UTF-8)."""
    files = {}
    for rel in _walk(ROOT):
        full = os.path.join(ROOT, rel)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        with open(full, "rb") as f:
            data = f.read()
        try:
            files[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            files[rel] = {"b64": base64.b64encode(data).decode("ascii")}
    return {"files": files}


def _test_env(req: dict) -> dict:
    path = ":".join(os.path.join(ROOT, p) for p in req.get("python_path", ["."]))
    return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path,
            "PYTHONHASHSEED": "0"}


def _child_limits(timeout_s: float) -> None:
    import resource

    cpu = int(timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _collect(proc, rfd: int, deadline: float) -> tuple[list, str]:
    """The runner's result lines until it exits or the deadline passes."""
    import select

    buffer, lines, status = b"", [], "ok"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        ready, _, _ = select.select([rfd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            buffer += chunk[: max(0, MAX_RESULTS - len(buffer))]
        elif proc.poll() is not None and not select.select([rfd], [], [], 0)[0]:
            break
    os.close(rfd)
    try:  # a runner that closed its pipe is exiting: give it a moment before the kill
        code = proc.wait(timeout=max(0.0, min(2.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    if status == "ok" and code < 0:
        status = f"killed by {signal.Signals(-code).name}"
    for raw in buffer.split(b"\n"):
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue  # a torn last line of a killed run, or garbage: not a result
    return lines, status if status != "ok" or code in (0, 1) else f"exit code {code}"


def _kill_others() -> None:
    """Every process of the sandbox but this one (the sandbox has its own pid namespace and /proc)."""
    me = os.getpid()
    for _ in range(3):
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        while True:  # reap the children (orphans are re-parented to us, pid 1)
            try:
                if os.waitpid(-1, os.WNOHANG) == (0, 0):
                    break
            except ChildProcessError:
                break
        if not pids:
            return
        time.sleep(0.01)


OPS = {"setup": op_setup, "list": op_list, "read": op_read, "search": op_search, "edit": op_edit, "test": op_test,
       "shell": op_shell, "snapshot": op_snapshot}


def _undumpable() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def main() -> None:
    _undumpable()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    proto_in, proto_out = os.fdopen(os.dup(0), "r"), os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.makedirs(PRIVATE, exist_ok=True)
    proto_out.write('{"ready": true}\n')
    proto_out.flush()
    for line in proto_in:
        req = json.loads(line)
        try:
            reply = OPS[req["op"]](req)
        except (ValueError, OSError, re.error, KeyError) as e:
            reply = {"error": str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"}
        proto_out.write(json.dumps(reply) + "\n")
        proto_out.flush()


if __name__ == "__main__":
    main()
