"""Reading an operator's Prometheus metrics, as a scraper would."""

from __future__ import annotations

import httpx

from rillet.devstack.operating import OperatorProcess


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
