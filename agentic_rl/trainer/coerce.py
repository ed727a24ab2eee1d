"""A recipe's YAML values into its typed sections: a mapping into a frozen dataclass, field by field,
each value checked against its annotation (`build`; a closed choice is a `Literal` of its values), and
`--set` keys into the mapping (`assign`).
An unknown key names the field it was probably meant to be."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any

from agentic_rl.errors import ConfigError


def assign(raw: dict, keys: list[str], value: Any) -> None:
    for k in keys[:-1]:
        raw = raw.setdefault(k, {})
        if not isinstance(raw, dict):
            raise ConfigError(f"{'.'.join(keys)}: {k} is not a section")
    raw[keys[-1]] = value


def build(cls, raw: Any, where: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"{where.rstrip('.') or 'recipe'}: expected a section (mapping), got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in names:
            close = _close_key(cls, str(key))
            hint = f" (did you mean '{where}{close}'?)" if close else ""
            raise ConfigError(f"unknown key '{where}{key}'{hint}; known: {', '.join(sorted(names))}")
    kwargs = {}
    for name, value in raw.items():
        tp = hints[name]
        key = f"{where}{name}"
        kwargs[name] = build(tp, value, key + ".") if dataclasses.is_dataclass(tp) else _coerce(tp, value, key)
    return cls(**kwargs)


def _close_key(cls, key: str) -> str | None:
    """The field `key` was probably meant to be: a near spelling here, or a field of that name (or a
    near one) in one of this section's subsections (`lr` -> `optim.lr`)."""
    hints = typing.get_type_hints(cls)
    here = [f.name for f in dataclasses.fields(cls)]
    below = [f"{f.name}.{g.name}" for f in dataclasses.fields(cls) if dataclasses.is_dataclass(hints[f.name])
             for g in dataclasses.fields(hints[f.name])]
    fields = [k for k in here if not dataclasses.is_dataclass(hints[k])]  # a section is no value's key
    exact = [k for k in below if k.split(".")[1] == key]
    close = difflib.get_close_matches(key, fields, n=1) or exact or difflib.get_close_matches(key, below, n=1)
    return close[0] if close else None


def _coerce(tp, value: Any, key: str) -> Any:
    """`value` as a field of type `tp` (unions tried arm by arm, ints and numeric strings as floats)."""
    origin = typing.get_origin(tp)
    if origin is typing.Literal:  # a closed choice: the annotation lists the values
        if value in typing.get_args(tp) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(str, typing.get_args(tp)))}")
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(tp, value, key)
    if origin is not None:  # list[...] / dict[...]
        return _coerce_container(tp, origin, value, key)
    if tp is type(None):
        if value is None:
            return None
        raise ConfigError(f"{key}: expected null")
    if tp is float and (number := _as_float(value)) is not None:
        return number
    if tp is Any or (isinstance(value, tp) and not (tp is int and isinstance(value, bool))):
        return value
    raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r} ({type(value).__name__})")


def _coerce_container(tp, origin, value: Any, key: str) -> Any:
    """A list or a dict; a list of sections (`reward.components`) has each element built."""
    if not isinstance(value, origin):
        raise ConfigError(f"{key}: expected a {origin.__name__}, got {value!r}")
    (item, *_) = typing.get_args(tp) or (Any,)
    if origin is list and dataclasses.is_dataclass(item):
        return [build(item, v, f"{key}[{i}].") for i, v in enumerate(value)]
    return value


def _coerce_union(tp, value: Any, key: str) -> Any:
    for arm in typing.get_args(tp):
        try:
            return _coerce(arm, value, key)
        except ConfigError:
            continue
    raise ConfigError(f"{key}: {value!r} is not a {tp}")


def _as_float(value: Any) -> float | None:
    """An int as a float, and a numeric string (YAML 1.1 reads "3e-6", no dot, as a string; a user
    writing it means the number); None where `value` is no number."""
    try:
        return float(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        return None
