"""The chart's values.yaml and the values model agree (the model generates values.schema.json).

Test plan:
- values.yaml holds exactly the model's defaults, so the schema documents what ships;
- the model refuses an unknown key and a wrong type, as the schema makes Helm do;
- by default the chart watches no namespace but its own: cluster-wide is a choice made with
  watchAnyNamespace, which the model and the schema refuse beside listed namespaces;
- every setting the operator reads (each RILLET_* variable of rillet.settings) is set by the
  chart's Deployment: nothing the operator can be told is out of the chart's reach;
- credentials (Kafka's, the schema registry's) reach the operator from a Secret, never from a
  literal value (values hold only the Secret's name).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from rillet import settings
from rillet.api import chartvalues

CHART = Path(__file__).parents[2] / "charts" / "rillet"
VALUES = CHART / "values.yaml"


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


def test_the_default_watches_neither_listed_namespaces_nor_every_namespace() -> None:
    defaults = chartvalues.ChartValues()
    assert defaults.watch_namespaces == []
    assert defaults.watch_any_namespace is False


@pytest.mark.parametrize(
    "values",
    [{"watchAnyNamespace": True}, {"watchNamespaces": ["team-a"]}, {"watchNamespaces": ["t-*"]}],
)
def test_either_watch_value_alone_is_accepted(values: dict[str, object]) -> None:
    chartvalues.ChartValues.model_validate(values)


@pytest.mark.parametrize("listed", [["team-a"], ["team-*"]])
def test_watch_any_namespace_with_listed_namespaces_is_refused(listed: list[str]) -> None:
    with pytest.raises(ValidationError, match="leave watchNamespaces empty"):
        chartvalues.ChartValues.model_validate(
            {"watchAnyNamespace": True, "watchNamespaces": listed}
        )


def test_the_schema_refuses_watch_any_namespace_beside_listed_namespaces() -> None:
    # What Helm evaluates (test_chart.py installs it): listed namespaces make watchAnyNamespace
    # false only; with none listed the condition does not apply.
    schema = chartvalues.values_schema()
    assert schema["if"] == {"properties": {"watchNamespaces": {"minItems": 1}}}
    assert schema["then"] == {"properties": {"watchAnyNamespace": {"const": False}}}


def _variables(model: type[BaseSettings]) -> set[str]:
    prefix = str(model.model_config.get("env_prefix", ""))
    return {f"{prefix}{name}".upper() for name in model.model_fields}


def test_the_deployment_sets_every_setting_the_operator_reads() -> None:
    deployment = (CHART / "templates" / "deployment.yaml").read_text(encoding="utf-8")
    set_by_chart = set(re.findall(r"name: (RILLET_[A-Z_]+)", deployment))
    read = set().union(
        *(
            _variables(model)
            for model in (
                settings.KafkaSettings,
                settings.OperatorSettings,
                settings.AppSettings,
                settings.TableServerSettings,
                settings.SchemaRegistrySettings,
            )
        )
    )
    # The Kafka login reaches the chart's operator as files (RILLET_KAFKA_CREDENTIALS_DIR);
    # the variables remain for an operator run by hand.
    assert read - set_by_chart == {"RILLET_KAFKA_SASL_USERNAME", "RILLET_KAFKA_SASL_PASSWORD"}
    assert set_by_chart - read == set()  # and nothing the operator would ignore


@pytest.mark.parametrize(
    "variable", ["RILLET_SCHEMA_REGISTRY_USERNAME", "RILLET_SCHEMA_REGISTRY_PASSWORD"]
)
def test_credentials_come_from_a_secret_never_from_values(variable: str) -> None:
    deployment = (CHART / "templates" / "deployment.yaml").read_text(encoding="utf-8")
    after = deployment.split(f"- name: {variable}\n", 1)[1]
    assert after.lstrip().startswith("valueFrom: {secretKeyRef: {name: {{ . }}, key: ")


def test_the_kafka_login_is_a_mounted_secret_never_an_environment_variable() -> None:
    deployment = (CHART / "templates" / "deployment.yaml").read_text(encoding="utf-8")
    assert "RILLET_KAFKA_SASL_PASSWORD" not in deployment
    assert "secretName: {{ . }}\n            items: [{key: username" in deployment
