"""Repeated runs and their medians and percentiles, printing each run as it ends."""

from __future__ import annotations

import statistics
from typing import Any

from bench.pipeline import settings


def median_of(label: str, measure: Any, *, config: settings.Settings) -> float:
    values = []
    for attempt in range(config.repeats):
        value = float(measure())
        values.append(value)
        print(f"  {label} run {attempt + 1}: {value:,.0f} records/s", flush=True)
    return statistics.median(values)


def median_pair(
    label: str,
    measure: Any,
    names: tuple[str, str] = ("whole run", "after the first batch"),
    *,
    config: settings.Settings,
) -> tuple[float, float]:
    """Medians of a pair of records/s figures: (whole run, steady state) unless `names` say."""
    runs = []
    for attempt in range(config.repeats):
        whole, steady = measure()
        runs.append((whole, steady))
        print(
            f"  {label} run {attempt + 1}: {whole:,.0f} records/s {names[0]}, "
            f"{steady:,.0f} {names[1]}",
            flush=True,
        )
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def p99(values: list[float]) -> float:
    """The 99th percentile (the nearest rank below)."""
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]
