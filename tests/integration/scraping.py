"""Reading Prometheus metrics pages (an operator's, an App driver's), as a scraper would."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rillet_devstack.operating import OperatorProcess


def scrape(operator: OperatorProcess) -> str:
    """The operator's /metrics page."""
    return httpx.get(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=10).text


def value(page: str, name: str, **labels: str) -> float:
    """A metric of a /metrics page, summed over the series that have these label values."""
    total = 0.0
    for line in page.splitlines():
        if not (line.startswith(name + "{") or line.startswith(name + " ")):
            continue
        series, number = line.rsplit(" ", 1)
        if all(f'{key}="{wanted}"' in series for key, wanted in labels.items()):
            total += float(number)
    return total


def sample_names(page: str) -> set[str]:
    """The names of the samples a /metrics page holds (`x_total`, `x_bucket`...), read by
    Prometheus's text-format parser; a family declared without any series gives none."""
    return {
        sample.name for family in text_string_to_metric_families(page) for sample in family.samples
    }


def metric(operator: OperatorProcess, name: str, **labels: str) -> float:
    """A metric of the operator now, summed over the series that have these label values."""
    return value(scrape(operator), name, **labels)


def serving(operator: OperatorProcess) -> bool:
    """Whether the operator's metrics endpoint answers yet (it starts with the operator)."""
    try:
        scrape(operator)
    except httpx.TransportError:
        return False
    return True
