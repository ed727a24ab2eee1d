"""A stand-in for the part of pytest's API a small test suite uses, for the sandbox's test runner
(`repo_runner.py`) where no pytest is installed: `raises`, `approx`, `mark.parametrize` (with
`param`), `mark.skip`/`skipif`/`xfail`, `skip`, `fail`, `importorskip`, and plain `fixture`s
(function-scoped, generator fixtures torn down after the test). Standard library only; the runner
puts it on sys.path after everything else, so a real pytest, where one is importable, wins.
"""

from __future__ import annotations

import inspect
import math
import re


class Skipped(Exception):
    pass


class Failed(AssertionError):
    pass


def skip(reason: str = "") -> None:
    raise Skipped(reason)


def fail(reason: str = "") -> None:
    raise Failed(reason)


def importorskip(name: str, *args, **kwargs):
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise Skipped(f"could not import {name!r}") from None


class Mark:
    def __init__(self, name: str, args=(), kwargs=None):
        self.name, self.args, self.kwargs = name, tuple(args), dict(kwargs or {})


class MarkDecorator:
    def __init__(self, name: str, args=(), kwargs=None):
        self.mark = Mark(name, args, kwargs)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
            target = args[0]
            target.pytestmark = [*getattr(target, "pytestmark", []), self.mark]
            return target
        return MarkDecorator(self.mark.name, args, kwargs)


class _Marks:
    def __getattr__(self, name: str) -> MarkDecorator:  # pytest.mark.<anything>, as pytest has it
        if name.startswith("__"):
            raise AttributeError(name)
        return MarkDecorator(name)


mark = _Marks()


class ParameterSet:
    def __init__(self, values, id=None, marks=()):
        self.values, self.id, self.marks = tuple(values), id, marks


def param(*values, id=None, marks=()):
    return ParameterSet(values, id, marks)


def fixture(fn=None, **kwargs):
    def wrap(f):
        f._agentic_fixture = kwargs.get("name") or f.__name__
        return f
    return wrap(fn) if callable(fn) else wrap


class RaisesContext:
    def __init__(self, expected, match=None):
        self.expected, self.match, self.value, self.type = expected, match, None, None

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        if etype is None:
            raise Failed(f"DID NOT RAISE {_names(self.expected)}")
        if not issubclass(etype, self.expected):
            return False
        if self.match is not None and not re.search(self.match, str(value)):
            raise Failed(f"Regex pattern {self.match!r} does not match {str(value)!r}")
        self.value, self.type = value, etype
        return True


def _names(expected) -> str:
    kinds = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(getattr(k, "__name__", str(k)) for k in kinds)


def raises(expected, *args, match=None, **kwargs):
    context = RaisesContext(expected, match)
    if not args:
        return context
    with context:
        args[0](*args[1:], **kwargs)
    return context


class approx:
    def __init__(self, expected, rel=None, abs=None):
        self.expected, self.rel, self.abs = expected, rel, abs

    def _close(self, a, b) -> bool:
        if isinstance(b, (list, tuple)):
            return isinstance(a, (list, tuple)) and len(a) == len(b) and all(self._close(x, y) for x, y in zip(a, b))
        if isinstance(b, dict):
            return isinstance(a, dict) and a.keys() == b.keys() and all(self._close(a[k], b[k]) for k in b)
        rel = 1e-6 if self.rel is None else self.rel
        tol = max(rel * math.fabs(b), 1e-12 if self.abs is None else self.abs)
        return a == b or math.fabs(a - b) <= tol

    def __eq__(self, other) -> bool:
        try:
            return self._close(other, self.expected)
        except TypeError:
            return False

    def __repr__(self) -> str:
        return f"approx({self.expected!r})"


class MonkeyPatch:
    def __init__(self):
        self._undo = []

    def setattr(self, target, name, value=None, raising=True):
        if isinstance(target, str):  # "module.attr", value
            module, _, attr = target.rpartition(".")
            import importlib

            target, name, value = importlib.import_module(module), attr, name
        self._undo.append((target, name, getattr(target, name, _MISSING)))
        setattr(target, name, value)

    def delattr(self, target, name, raising=True):
        if hasattr(target, name):
            self._undo.append((target, name, getattr(target, name)))
            delattr(target, name)

    def setitem(self, mapping, key, value):
        self._undo.append((mapping, key, mapping.get(key, _MISSING), True))
        mapping[key] = value

    def setenv(self, name, value, prepend=None):
        import os

        self.setitem(os.environ, name, str(value))

    def delenv(self, name, raising=True):
        import os

        if name in os.environ:
            self._undo.append((os.environ, name, os.environ[name], True))
            del os.environ[name]

    def undo(self):
        for entry in reversed(self._undo):
            target, name, old = entry[:3]
            if len(entry) == 4:
                if old is _MISSING:
                    target.pop(name, None)
                else:
                    target[name] = old
            elif old is _MISSING:
                delattr(target, name)
            else:
                setattr(target, name, old)
        self._undo = []


_MISSING = object()
