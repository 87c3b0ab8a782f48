"""Shared test configuration: every test is marked unit or integration by its folder."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.fspath)).relative_to(TESTS).parts[0]
        if folder in ("unit", "integration"):
            item.add_marker(getattr(pytest.mark, folder))
