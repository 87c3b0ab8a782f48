"""The pydantic models refuse what the apiserver refuses, for the same field and reason.

Test plan:
- every create case of tests/integration/invalid_crs.py (the table the apiserver test uses) is
  refused by the models, at the field the apiserver names; where the apiserver's message comes
  from one of our CEL rules, pydantic gives the very same message;
- both sides of every update case are valid objects (only the change is invalid, which the
  apiserver alone can see);
- the rules' Python mirrors agree with their CEL on a few boundary values;
- the Secret names an App may not use are exactly how the Secrets Rillet makes for Apps (and
  Table servers) end, and a Secret of any other name is accepted.
"""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pytest

from rillet.api.v1alpha1 import appresources, apps, fields, kinds
from rillet.reconcile import kafkaaccess, naming, tableservers
from tests.integration import invalid_cases, invalid_crs

CREATES = [case for case in invalid_crs.CASES if case.before is None]
UPDATES = [case for case in invalid_crs.CASES if case.before is not None]


def _path(text: str) -> str:
    """The field path a message starts with, without list indices: spec.inputs[0].name ->
    spec.inputs.name."""
    return re.sub(r"\[\d+\]", "", re.split(r"[ :]", text, maxsplit=1)[0])


def _location(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"] if not isinstance(part, int))


def test_the_table_is_big_enough() -> None:
    assert len(invalid_crs.CASES) >= 40
    assert len({case.id for case in invalid_crs.CASES}) == len(invalid_crs.CASES)


@pytest.mark.parametrize("case", CREATES, ids=lambda case: case.id)
def test_models_refuse_invalid_objects(case: invalid_cases.Case) -> None:
    with pytest.raises(pydantic.ValidationError) as refused:
        kinds.parse(case.manifest)

    if case.expect in str(refused.value):
        return  # our own rule, same message as the apiserver's
    field = _path(case.expect)
    locations = [_location(error) for error in refused.value.errors()]
    assert any(loc == field or loc.startswith(f"{field}.") for loc in locations), (
        f"the apiserver names {field}; pydantic refused at {locations}"
    )


@pytest.mark.parametrize("case", UPDATES, ids=lambda case: case.id)
def test_both_sides_of_an_invalid_update_are_valid(case: invalid_cases.Case) -> None:
    assert case.before is not None
    kinds.parse(case.before)
    kinds.parse(case.manifest)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), ("0s", 0), ("2h0m5s", 7205)],
)
def test_durations_parse_like_go(text: str, seconds: float) -> None:
    assert fields.parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["5", "5 minutes", "1d", "1.5h", "-5m", "m", "", "99999999999h"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        fields.parse_duration(text)


def test_window_rules_compare_durations_not_strings() -> None:
    # "90s" > "5m" as strings, but not as durations: the rule must compare lengths.
    document = invalid_cases.table({"window": {"type": "hopping", "size": "5m", "step": "90s"}})
    kinds.parse(document)


def test_the_refused_secret_names_are_those_rillet_makes() -> None:
    made = [
        kafkaaccess.secret_name("billing"),
        naming.app_spark_auth_secret_name("billing"),
        naming.app_schema_registry_secret_name("billing"),
        tableservers.registry_secret_name("counts"),
    ]
    suffixes = {next(s for s in appresources.RILLET_SECRET_SUFFIXES if n.endswith(s)) for n in made}

    assert suffixes == set(appresources.RILLET_SECRET_SUFFIXES)


@pytest.mark.parametrize("name", ["store", "billing-s3", "kafka", "spark-auth-keys"])
def test_a_checkpoint_secret_of_any_other_name_is_accepted(name: str) -> None:
    checkpoint = {"location": "s3a://bucket/app", "secretRef": {"name": name}}

    parsed = apps.App.model_validate(invalid_cases.app({"checkpoint": checkpoint}))

    assert parsed.spec.checkpoint is not None
    assert parsed.spec.checkpoint.secret_ref is not None
    assert parsed.spec.checkpoint.secret_ref.name == name
