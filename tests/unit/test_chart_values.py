"""The chart's values.yaml and the values model agree (the model generates values.schema.json).

Test plan:
- values.yaml holds exactly the model's defaults, so the schema documents what ships;
- the model refuses an unknown key and a wrong type, as the schema makes Helm do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from rillet.api import chartvalues

VALUES = Path(__file__).parents[2] / "charts" / "rillet" / "values.yaml"


def test_values_yaml_holds_the_models_defaults() -> None:
    shipped = yaml.safe_load(VALUES.read_text(encoding="utf-8"))
    assert chartvalues.ChartValues().model_dump(by_alias=True) == shipped


@pytest.mark.parametrize(
    "values",
    [{"operator": {"resyncSecnds": 5}}, {"apps": {"scaleSeconds": "often"}}, {"bogus": 1}],
)
def test_the_model_refuses_typos_and_wrong_types(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        chartvalues.ChartValues.model_validate(values)
