"""The generated files are up to date with the models.

Test plan:
- crds/ and charts/rillet/crds/ hold exactly what the models generate, byte for byte;
- docs/api.md is what the models generate, and so are the chart's values.schema.json and
  README.md (its values table has a row per value of the model);
- rendering is deterministic (same text twice) and sorted by file name.

On failure, regenerate with `rillet crds generate` and commit the result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.crdgen import documenting, generating

ROOT = Path(__file__).parents[2]
FIX = "out of date: run `rillet crds generate` and commit the result"


@pytest.mark.parametrize("directory", generating.CRD_DIRECTORIES, ids=str)
def test_checked_in_crds_match_the_models(directory: Path) -> None:
    rendered = generating.render_all()
    on_disk = {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted((ROOT / directory).glob("*.yaml"))
    }

    assert sorted(on_disk) == sorted(rendered), f"{directory}: files differ; {FIX}"
    for name, text in rendered.items():
        assert on_disk[name] == text, f"{directory / name} is {FIX}"


def test_checked_in_api_reference_matches_the_models() -> None:
    on_disk = (ROOT / generating.API_REFERENCE).read_text(encoding="utf-8")
    assert on_disk == documenting.render_api_reference(), f"{generating.API_REFERENCE} is {FIX}"


def test_checked_in_values_schema_matches_the_model() -> None:
    on_disk = (ROOT / generating.VALUES_SCHEMA).read_text(encoding="utf-8")
    assert on_disk == generating.render_values_schema(), f"{generating.VALUES_SCHEMA} is {FIX}"


def test_checked_in_chart_readme_matches_the_model() -> None:
    on_disk = (ROOT / generating.CHART_README).read_text(encoding="utf-8")
    assert on_disk == documenting.render_chart_readme(), f"{generating.CHART_README} is {FIX}"


def test_chart_readme_has_a_row_per_value() -> None:
    rows = [line for line in documenting.render_chart_readme().splitlines() if line[:3] == "| `"]
    keys = [row.split("`")[1] for row in rows]

    assert len(keys) == len(set(keys))
    assert {"image", "kafka.bootstrapServers", "monitoring.serviceMonitor.interval"} <= set(keys)
    interval = rows[keys.index("monitoring.serviceMonitor.interval")]
    assert '| string | `"30s"` | How often Prometheus scrapes.' in interval
    requests = rows[keys.index("resources.requests")]
    assert "| map of string or integer |" in requests


def test_rendering_is_deterministic_and_sorted() -> None:
    first, second = generating.render_all(), generating.render_all()

    assert first == second
    assert (
        list(first)
        == sorted(first)
        == ["rillet.io_apps.yaml", "rillet.io_tables.yaml", "rillet.io_topics.yaml"]
    )
    assert all(text.startswith(generating.HEADER) for text in first.values())
