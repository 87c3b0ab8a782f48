"""The chart's Grafana dashboard, read as data: its panels, its PromQL, the metric names in it.

Pure (the only I/O is reading the JSON from the repository), so the unit tests use it too: they
hold the names against the metric families the code declares, the integration tests against
what a running operator and a running App driver serve on /metrics.

Metric names are taken out of PromQL the way Prometheus's lexer would see them: string
literals, label matchers, range selectors, grouping label lists, numbers, durations and
Grafana's variables are removed first, and of the identifiers left, those followed by `(`
(functions, aggregations) and PromQL's keywords are not metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "charts" / "rillet" / "dashboards" / "rillet.json"

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPINGS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_NUMBERS = re.compile(
    r"(?<![\w:.])(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])*)"
)
_IDENTIFIERS = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "atan2",
        "inf",
        "nan",
    }
)
# Grafana's Prometheus variable queries: label_values(selector, label), query_result(expr).
_LABEL_VALUES = re.compile(r"^\s*label_values\((?P<selector>.*),\s*\w+\s*\)\s*$", re.DOTALL)
_LABEL_VALUES_ALONE = re.compile(r"^\s*label_values\(\s*\w+\s*\)\s*$")
_QUERY_RESULT = re.compile(r"^\s*query_result\((?P<expr>.*)\)\s*$", re.DOTALL)

# The samples a family of each type is exposed as (prometheus_client's text format).
SAMPLE_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
}


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    """The dashboard as Grafana reads it."""
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that shows data (rows left out; the panels of a collapsed row included)."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def expressions(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every query: each panel target, and each query variable (the PromQL
    inside Grafana's label_values/query_result)."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} query {target['refId']}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            yield f"variable {variable['name']!r}", variable_promql(text)


def variable_promql(query: str) -> str:
    """The PromQL of a Grafana Prometheus variable query ("" for label_values(label))."""
    if _LABEL_VALUES_ALONE.match(query):
        return ""
    for form in (_LABEL_VALUES, _QUERY_RESULT):
        found = form.match(query)
        if found:
            return found.group(1)  # the selector, or the expression
    raise ValueError(f"not a variable query this reader knows: {query!r}")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (as exposed: `x_bucket`, `x_total`)."""
    if "__name__" in expr:
        raise ValueError(f"a metric selected by __name__ is not read here: {expr!r}")
    text = _STRINGS.sub(" ", expr)
    text = _VARIABLES.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPINGS.sub(" ", text)
    text = _NUMBERS.sub(" ", text)
    names = set()
    for found in _IDENTIFIERS.finditer(text):
        name = found.group()
        called = text[found.end() :].lstrip().startswith("(")
        if not called and name.lower() not in _KEYWORDS:
            names.add(name)
    return names


def used_metrics(dashboard: dict[str, Any]) -> dict[str, set[str]]:
    """Each metric name the dashboard selects, with where."""
    used: dict[str, set[str]] = {}
    for where, expr in expressions(dashboard):
        for name in metric_names(expr):
            used.setdefault(name, set()).add(where)
    return used


def sample_names(families: Iterable[tuple[str, str]]) -> set[str]:
    """The sample names families, given as (name, type) as the client declares them (a
    counter's name without `_total`), are exposed as."""
    return {name + suffix for name, kind in families for suffix in SAMPLE_SUFFIXES[kind]}
