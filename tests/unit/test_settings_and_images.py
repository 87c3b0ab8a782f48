"""Operator settings keep secrets secret; the runtime image's connector pom follows versions.py.

Test plan:
- the SASL password is read from the environment, hidden in repr/str/JSON dumps, and handed
  only to the Kafka client config.
- the namespace list is split from one comma-separated variable; it counts as listed (the
  chart grants a Role in each) only when every entry is a name, not a glob or an exclusion.
- images/runtime/connector-pom.xml pins exactly the connector jars the local stack uses.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.settings import KafkaSettings, OperatorSettings
from rillet_devstack import provisioning

REPO = Path(__file__).resolve().parents[2]


def test_password_never_shows_outside_the_client_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RILLET_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("RILLET_KAFKA_SASL_USERNAME", "app")
    monkeypatch.setenv("RILLET_KAFKA_SASL_PASSWORD", "hunter2-very-secret")
    settings = KafkaSettings()
    for rendering in (repr(settings), str(settings), settings.model_dump_json()):
        assert "hunter2-very-secret" not in rendering
    assert settings.client_config()["sasl.password"] == "hunter2-very-secret"
    assert settings.client_config()["sasl.mechanism"] == "SCRAM-SHA-512"


def test_namespaces_split_from_one_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RILLET_NAMESPACES", "team-a, team-*")
    assert OperatorSettings().namespaces == ["team-a", "team-*"]


@pytest.mark.parametrize(
    ("namespaces", "listed"),
    [
        ("team-a,team-b", ("team-a", "team-b")),
        ("", ()),
        ("team-a,team-*", ()),
        ("team-?", ()),
        ("!kube-system", ()),
    ],
)
def test_namespaces_listed_only_when_all_are_names(
    monkeypatch: pytest.MonkeyPatch, namespaces: str, listed: tuple[str, ...]
) -> None:
    monkeypatch.setenv("RILLET_NAMESPACES", namespaces)
    assert OperatorSettings().listed_namespaces == listed


def test_runtime_image_connector_pom_matches_versions() -> None:
    expected = provisioning.maven_copy_pom(provisioning.SPARK_KAFKA_ARTIFACTS, "${outputDirectory}")
    assert (REPO / "images/runtime/connector-pom.xml").read_text() == expected
