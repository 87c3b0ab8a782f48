"""What the Helm chart renders (`helm lint` and `helm template`, no install): its CRDs, its
values checked, and the rights and settings each mode gives the operator.

Test plan:
- `helm lint` passes and the chart's CRDs equal crds/ (generated from the models).
- `helm lint` and `helm template` pass with the defaults and with each values file in ci/
  (monitors, a PodDisruptionBudget, listed and globbed namespaces, every namespace).
- values are checked against values.schema.json: a misspelled key and a wrong type are each
  refused, naming the key, by `helm template` (so by install and upgrade too); so are both
  monitors at once (the operator would be scraped twice).
- a schema registry's URL reaches the operator as a value, its credentials from the Secret
  named (secretKeyRefs); by default none;
- on Secrets the operator may create and patch, and no more, in every mode (no get, list or
  watch: it reads its own back by a patch the chart's admission policy holds to them);
- with per-App principals the operator is given the sweep's pace; reading kube-system's uid
  needs nothing more than its `get` on namespaces;
- the Grafana dashboard is off by default; on, it renders as a ConfigMap labelled for Grafana's
  sidecar (grafana_dashboard: "1", merged with labels of the values), with the values'
  annotations, in the release's namespace or the one given, holding dashboards/rillet.json as
  is (its queries are checked in test_dashboard_metrics.py).
- namespaces listed by name render a Role and RoleBinding in each, with the rules the
  ClusterRole of watchAnyNamespace holds for namespaced resources, and a ClusterRole left with
  only cluster-scoped ones (namespaces, CRDs, nodes).
"""

from __future__ import annotations

import filecmp
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from . import dashboards
from .conftest import REPO, Kube
from .helmcharts import (
    ANY,
    CHART,
    CI_VALUES,
    CLUSTER_SCOPED,
    helm,
    operator_env,
    operators_cluster_role,
    rendered,
)


def test_chart_lints_and_carries_the_generated_crds(kube: Kube) -> None:
    assert "0 chart(s) failed" in helm(kube, "lint", str(CHART)).stdout
    comparison = filecmp.dircmp(REPO / "crds", CHART / "crds")
    assert comparison.left_list == comparison.right_list
    assert not comparison.diff_files


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: v.name if v else "defaults")
def test_chart_lints_and_renders_with_each_ci_values_file(kube: Kube, values: Path | None) -> None:
    args = ["--values", str(values)] if values else []
    assert "0 chart(s) failed" in helm(kube, "lint", "--strict", str(CHART), *args).stdout
    kinds = {obj["kind"] for obj in rendered(kube, *args)}
    assert {"Deployment", "ClusterRole", "ClusterRoleBinding", "ServiceAccount"} <= kinds


def test_listed_namespaces_get_a_role_each_and_the_cluster_role_only_cluster_scope(
    kube: Kube,
) -> None:
    (cluster_wide,) = (obj for obj in rendered(kube, *ANY) if operators_cluster_role(obj))
    namespaced = [
        rule for rule in cluster_wide["rules"] if not CLUSTER_SCOPED & set(rule["resources"])
    ]

    objects = rendered(kube, "--values", str(CHART / "ci" / "listed-namespaces-values.yaml"))

    (cluster_role,) = (obj for obj in objects if operators_cluster_role(obj))
    assert {r for rule in cluster_role["rules"] for r in rule["resources"]} == CLUSTER_SCOPED
    # Leader election's Role, in the release's namespace alone, grants the Lease and nothing else.
    (election,) = (
        o for o in objects if o["kind"] == "Role" and o["metadata"]["namespace"] == "ops"
    )
    assert election["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    watching = [o for o in objects if o["metadata"].get("name") == "ops-rillet-operator"]
    for kind in ("Role", "RoleBinding"):
        found = [obj for obj in watching if obj["kind"] == kind]
        assert sorted(obj["metadata"]["namespace"] for obj in found) == ["team-a", "team-b"]
    for role in (obj for obj in watching if obj["kind"] == "Role"):
        assert role["rules"] == namespaced
    for binding in (obj for obj in watching if obj["kind"] == "RoleBinding"):
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "ops-rillet-operator",
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "rillet-operator", "namespace": "ops"}
        ]
    (globbed,) = (
        obj
        for obj in rendered(kube, "--values", str(CHART / "ci" / "glob-namespaces-values.yaml"))
        if operators_cluster_role(obj)
    )
    assert globbed["rules"] == cluster_wide["rules"]
    # The drivers' ClusterRole, whatever is watched, is the one the operator may bind and is
    # told to: nothing else of it is the operator's.
    bind = {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles"],
        "resourceNames": ["ops-rillet-operator-driver"],
        "verbs": ["bind"],
    }
    assert bind in namespaced
    for found in (rendered(kube, *ANY), objects):
        (drivers,) = (o for o in found if o["metadata"]["name"] == "ops-rillet-operator-driver")
        assert drivers["kind"] == "ClusterRole"
        assert {r for rule in drivers["rules"] for r in rule["resources"]} == {
            "pods",
            "pods/log",
            "services",
            "configmaps",
            "persistentvolumeclaims",
        }
        env = operator_env(found)
        assert env["RILLET_APP_DRIVER_CLUSTER_ROLE"]["value"] == "ops-rillet-operator-driver"


def test_both_monitors_at_once_are_refused(kube: Kube) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        rendered(
            kube,
            "--set",
            "monitoring.serviceMonitor.enabled=true",
            "--set",
            "monitoring.podMonitor.enabled=true",
        )
    assert "enable serviceMonitor or podMonitor, not both" in refused.value.stderr


# The operator's one rule on Secrets, in every mode: it makes its own and reads them back by a
# patch the chart's admission policy holds to them; no get, list or watch.
SECRET_RULE = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "patch"]}


def _secret_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (role,) = (obj for obj in objects if operators_cluster_role(obj))
    return [rule for rule in role["rules"] if "secrets" in rule["resources"]]


def test_the_schema_registry_reaches_the_operator_with_its_credentials_from_a_secret(
    kube: Kube,
) -> None:
    objects = rendered(kube, *ANY, "--values", str(CHART / "ci" / "schema-registry-values.yaml"))

    env = operator_env(objects)
    assert env["RILLET_SCHEMA_REGISTRY_URL"]["value"] == (
        "http://registry.kafka:8080/apis/ccompat/v7"
    )
    assert env["RILLET_SCHEMA_REGISTRY_REQUEST_TIMEOUT_SECONDS"]["value"] == "10"
    for key in ("username", "password"):
        assert env[f"RILLET_SCHEMA_REGISTRY_{key.upper()}"] == {
            "name": f"RILLET_SCHEMA_REGISTRY_{key.upper()}",
            "valueFrom": {"secretKeyRef": {"name": "schema-registry-credentials", "key": key}},
        }
    # Each Avro App's copy of the credentials is applied server-side (an apply that creates
    # is authorized as a create); no Secret is read by `get` (k8s.ownsecrets), with or without.
    assert _secret_rules(objects) == [SECRET_RULE]
    without = rendered(kube, *ANY)
    assert not [name for name in operator_env(without) if "SCHEMA_REGISTRY" in name]
    assert _secret_rules(without) == [SECRET_RULE]


def test_app_principals_keep_the_secret_rule_and_set_the_sweeps_pace(
    kube: Kube,
) -> None:
    objects = rendered(
        kube,
        *ANY,
        *("--set", "kafka.appPrincipals=true", "--set", "kafka.appPrincipalSweepSeconds=60"),
    )
    # Each App's Secret <app>-kafka: created once, patched when its password is rotated.
    assert _secret_rules(objects) == [SECRET_RULE]
    env = operator_env(objects)
    assert env["RILLET_APP_KAFKA_PRINCIPALS"]["value"] == "true"
    assert env["RILLET_APP_PRINCIPAL_SWEEP_SECONDS"]["value"] == "60"
    # kube-system's uid, this cluster's id in user names: `get` on every namespace covers it.
    (role,) = (obj for obj in objects if operators_cluster_role(obj))
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]} in (
        role["rules"]
    )


def _dashboard_configmaps(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "ConfigMap" and "rillet.json" in o.get("data", {})]


def test_the_grafana_dashboard_renders_as_a_configmap_for_grafanas_sidecar(kube: Kube) -> None:
    shipped = dashboards.load()
    assert not _dashboard_configmaps(rendered(kube))

    (in_release,) = _dashboard_configmaps(
        rendered(kube, "--set", "monitoring.grafanaDashboard.enabled=true")
    )
    assert in_release["metadata"]["namespace"] == "ops"
    assert in_release["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(in_release["data"]["rillet.json"]) == shipped

    (in_grafanas,) = _dashboard_configmaps(
        rendered(
            kube,
            "--values",
            str(CHART / "ci" / "grafana-dashboard-values.yaml"),
            "--set",
            "monitoring.grafanaDashboard.labels.team=data",
        )
    )
    metadata = in_grafanas["metadata"]
    assert metadata["name"] == "ops-rillet-operator-dashboard"
    assert metadata["namespace"] == "monitoring"
    assert {"grafana_dashboard": "1", "team": "data"}.items() <= metadata["labels"].items()
    assert metadata["annotations"] == {"grafana_folder": "Rillet"}
    assert json.loads(in_grafanas["data"]["rillet.json"]) == shipped


@pytest.mark.parametrize(
    ("setting", "refusal"),
    [
        ("operator.resyncSecnds=5", "at '/operator': additional properties 'resyncSecnds'"),
        ("bogusKey=1", "at '': additional properties 'bogusKey'"),
        ("operator.metricsPort=metrics", "at '/operator/metricsPort': got string, want integer"),
        ("apps.imagePullPolicy=Sometimes", "at '/apps/imagePullPolicy'"),
        ("serviceMonitor.enabled=true", "at '': additional properties 'serviceMonitor'"),
        ("monitoring.podMonitor.interval=often", "at '/monitoring/podMonitor/interval'"),
        ("watchNamespaces={Team_A}", "at '/watchNamespaces/0'"),
    ],
)
def test_values_with_a_typo_or_a_wrong_type_are_refused(
    kube: Kube, setting: str, refusal: str
) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        helm(kube, "template", str(CHART), "--set", setting)
    assert refusal in refused.value.stderr
