"""What every benchmark's report is made of: figures (printed as JSON) and summary lines."""

from __future__ import annotations

from typing import Any


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


Report = tuple[dict[str, Any], list[str]]  # figures (printed as JSON), then the summary lines


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ratio(value: float | None, baseline: float | None) -> float | None:
    return value / baseline if value is not None and baseline else None
