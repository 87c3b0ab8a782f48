"""An App's NetworkPolicy: its own pods reach its pods (Spark's ports), monitoring namespaces
the driver's metrics port, nobody else; applied before the pods it admits to."""

from __future__ import annotations

from typing import Any

from rillet.reconcile import appresolving
from rillet.reconcile.appobjects import building, contexts
from rillet.settings import AppSettings, KafkaSettings, SchemaRegistrySettings
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV


def _policy(env: contexts.AppEnvironment = ENV) -> dict[str, Any]:
    return building.build_app_objects(*wordcount_inputs.inputs(), env).network_policy


def test_only_the_apps_own_pods_reach_its_pods_by_default() -> None:
    policy = _policy()

    assert (policy["kind"], policy["metadata"]["name"]) == ("NetworkPolicy", "wordcount-spark")
    assert policy["metadata"]["namespace"] == "team"
    (owner,) = policy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("App", "wordcount", True)
    app_pods = {"matchLabels": {"rillet.io/app": "wordcount"}}
    assert policy["spec"] == {
        "podSelector": app_pods,
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": app_pods}]}],
    }


def test_monitoring_namespaces_reach_the_metrics_port_alone() -> None:
    env = appresolving.environment(
        AppSettings(),
        KafkaSettings(bootstrap="kafka:9092"),
        SchemaRegistrySettings(),
        apiserver_url="https://k",
    )
    ingress = _policy(env)["spec"]["ingress"]

    assert ingress[1] == {
        "from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ],
        "ports": [{"port": 9090, "protocol": "TCP"}],
    }
    assert len(ingress) == 2


def test_the_policy_is_applied_before_the_driver() -> None:
    objects = building.build_app_objects(*wordcount_inputs.inputs(), ENV)
    kinds = [obj["kind"] for obj in objects.in_apply_order()]

    assert kinds.index("NetworkPolicy") < kinds.index("StatefulSet")
