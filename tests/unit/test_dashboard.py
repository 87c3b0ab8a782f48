"""The chart's Grafana dashboard is valid, and every query names a metric the code declares.

Test plan:
- the JSON parses; schemaVersion 39, a stable uid; a `datasource` variable (Prometheus) that
  every panel and query uses, and `namespace`/`app` query variables; panel ids unique, every
  panel inside the 24-column grid and overlapping no other;
- every panel has at least one query, with a PromQL expression, refIds unique in the panel;
- metric names are read out of PromQL: through functions, aggregations with `by`, histogram
  quantiles, label matchers (even ones whose strings look like queries), ranges with Grafana's
  variables, binary operators with vector matching, numbers and durations; and out of Grafana's
  label_values/query_result variable queries;
- every metric name the dashboard uses is a sample name (`_total`, `_bucket`, `_sum`,
  `_count` as the client exposes them) of a family the operator (rillet.metrics) or an App's
  driver (rillet.runtime.batches.metrics) declares: the difference is empty;
- every family declared there has a panel, and the App panels follow the namespace and app
  variables.
(What a running operator and driver really serve is held against the dashboard in
tests/integration/test_dashboard_metrics.py.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase

from rillet import metrics as operator_metrics
from rillet.runtime.batches import metrics as runtime_metrics
from tests.integration import dashboards

DASHBOARD = dashboards.load()
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def declared(objects: Iterable[object]) -> list[tuple[str, str]]:
    """(name, type) of every metric family among `objects`."""
    return [
        (family.name, family.type)
        for obj in objects
        if isinstance(obj, MetricWrapperBase)
        for family in obj.describe()
    ]


OPERATOR_FAMILIES = declared(vars(operator_metrics).values())
RUNTIME_FAMILIES = declared(vars(runtime_metrics.Metrics(app="a", namespace="n")).values())


def test_the_dashboard_is_grafana_json_on_a_datasource_variable() -> None:
    assert DASHBOARD["schemaVersion"] == 39
    assert DASHBOARD["uid"] == "rillet-overview"
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert list(variables) == ["datasource", "namespace", "app"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "app"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE
    for panel in dashboards.panels(DASHBOARD):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert all(t["datasource"] == DATASOURCE for t in panel["targets"]), panel["title"]


def test_panels_have_unique_ids_and_fit_the_grid_without_overlapping() -> None:
    every = [*DASHBOARD["panels"], *(p for r in DASHBOARD["panels"] for p in r.get("panels", []))]
    ids = [panel["id"] for panel in every]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in every:
        box = panel["gridPos"]
        assert box["x"] >= 0, panel["title"]
        assert box["x"] + box["w"] <= 24, panel["title"]
        for x in range(box["x"], box["x"] + box["w"]):
            for y in range(box["y"], box["y"] + box["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_every_panel_has_a_query() -> None:
    found = list(dashboards.panels(DASHBOARD))
    assert len(found) >= 15
    for panel in found:
        targets = panel.get("targets") or []
        assert targets, f"panel {panel['title']!r} has no query"
        assert all(t["expr"].strip() for t in targets), panel["title"]
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("rillet_topic_queue_depth", {"rillet_topic_queue_depth"}),
        (
            "histogram_quantile(0.99, sum by (kind, le) "
            "(rate(rillet_reconcile_duration_seconds_bucket[$__rate_interval])))",
            {"rillet_reconcile_duration_seconds_bucket"},
        ),
        (
            'sum(rate(a_sum{app=~"$app", x="rate(b_total[5m])"}[5m])) / sum(rate(a_count[1h30m]))',
            {"a_sum", "a_count"},
        ),
        ("sum(rate(c_total[${__rate_interval}])) or vector(0)", {"c_total"}),
        ("x / on (app) group_left (topic) y offset 5m > bool 1e3", {"x", "y"}),
        ("max by (p) (g{a='}'}) unless ignoring (q) h > Inf", {"g", "h"}),
        ("sum without (instance) (m:recorded) * 60", {"m:recorded"}),
    ],
)
def test_metric_names_are_read_from_promql(expr: str, names: set[str]) -> None:
    assert dashboards.metric_names(expr) == names


@pytest.mark.parametrize(
    ("query", "promql"),
    [
        (
            'label_values(rillet_batches_total{namespace=~"$namespace"}, app)',
            'rillet_batches_total{namespace=~"$namespace"}',
        ),
        ("label_values(namespace)", ""),
        ("query_result(topk(5, rillet_input_lag_records))", "topk(5, rillet_input_lag_records)"),
    ],
)
def test_variable_queries_give_their_promql(query: str, promql: str) -> None:
    assert dashboards.variable_promql(query) == promql


def test_every_metric_named_is_one_the_operator_or_the_runtime_declares() -> None:
    used = dashboards.used_metrics(DASHBOARD)
    exposed = dashboards.sample_names(OPERATOR_FAMILIES + RUNTIME_FAMILIES)

    unknown = {name: sorted(where) for name, where in used.items() if name not in exposed}

    assert not unknown, f"the dashboard names metrics nothing declares: {unknown}"
    assert set(used) & dashboards.sample_names(OPERATOR_FAMILIES)
    assert set(used) & dashboards.sample_names(RUNTIME_FAMILIES)


@pytest.mark.parametrize(
    "family", [name for name, _ in OPERATOR_FAMILIES + RUNTIME_FAMILIES], ids=str
)
def test_every_declared_family_has_a_panel(family: str) -> None:
    kinds = dict(OPERATOR_FAMILIES + RUNTIME_FAMILIES)
    samples = dashboards.sample_names([(family, kinds[family])])
    assert samples & set(dashboards.used_metrics(DASHBOARD)), f"no panel shows {family}"


def test_app_panels_follow_the_namespace_and_app_variables() -> None:
    runtime = dashboards.sample_names(RUNTIME_FAMILIES)
    for where, expr in _panel_expressions(DASHBOARD):
        if dashboards.metric_names(expr) & runtime:
            assert 'namespace=~"$namespace"' in expr, where
            assert 'app=~"$app"' in expr, where


def _panel_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [(w, e) for w, e in dashboards.expressions(dashboard) if w.startswith("panel ")]
