"""Merging the fragments option functions return into one object.

An option function takes the `AppContext` and returns a fragment: the part of an object it is
responsible for, e.g. `{"spec": {"volumes": [<one volume>]}}`. Fragments merge in order: mappings
key by key, lists by concatenation (each option adds its own env vars, volumes, mounts). Two
options setting the same scalar to different values is a bug, so it raises rather than letting
the later one win silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rillet.reconcile.appobjects import contexts

Fragment = dict[str, Any]
Option = Callable[[contexts.AppContext], Fragment]


def merge(*fragments: Mapping[str, Any]) -> Fragment:
    """The fragments merged in order (see the module docstring)."""
    merged: Fragment = {}
    for fragment in fragments:
        merged = _merge_maps(merged, fragment, path="")
    return merged


def _merge_maps(base: Mapping[str, Any], extra: Mapping[str, Any], *, path: str) -> Fragment:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = _merge_values(merged[key], value, f"{path}.{key}") if key in merged else value
    return merged


def _merge_values(base: Any, extra: Any, path: str) -> Any:
    if isinstance(base, Mapping) and isinstance(extra, Mapping):
        return _merge_maps(base, extra, path=path)
    if isinstance(base, list) and isinstance(extra, list):
        return [*base, *extra]
    if base != extra:
        raise ValueError(f"options disagree on {path}: {base!r} and {extra!r}")
    return base


def build(context: contexts.AppContext, options: Iterable[Option]) -> Fragment:
    """The object the options make together, in their order."""
    return merge(*(option(context) for option in options))
